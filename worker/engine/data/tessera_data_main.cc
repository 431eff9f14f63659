// tessera-data: prepares training data for tessera-train.
//   tessera-data convert --input FILES_OR_FOLDERS... --output DIR [--tokenizer byte|bpe] ...
//   tessera-data inspect DIR [--verify] [--sample N]
#include <CLI/CLI.hpp>
#include <iostream>

#include "absl/strings/str_format.h"
#include "worker/engine/common/content_hash.h"
#include "worker/engine/data/convert.h"
#include "worker/engine/data/token_shards.h"
#include "worker/engine/data/tokenizer.h"

namespace {

int Fail(const absl::Status& st) {
  std::cerr << "tessera-data: " << st.message() << "\n";
  return 1;
}

int Inspect(const std::string& folder, bool verify, int64_t show_sample) {
  auto reader = tessera::engine::TokenShardReader::Open(folder);
  if (!reader.ok()) return Fail(reader.status());
  const auto& index = (*reader)->index();
  std::cout << absl::StrFormat(
      "%s: %d samples of %d tokens in %d shards, tokenizer %s (vocab %d)\n", folder,
      index.total_samples, index.sample_tokens, index.shards.size(),
      index.tokenizer.value("kind", "?"), index.tokenizer.value("vocab_size", 0));
  if (verify) {
    for (const auto& s : index.shards) {
      auto hash = tessera::engine::HashFile(folder + "/" + s.file);
      if (!hash.ok()) return Fail(hash.status());
      if (*hash != s.hash) {
        return Fail(absl::DataLossError(
            absl::StrFormat("%s/%s: content hash %s does not match index.json's %s", folder, s.file,
                            *hash, s.hash)));
      }
    }
    std::cout << "every shard matches its hash\n";
  }
  if (show_sample >= 0) {
    std::vector<int64_t> tokens(static_cast<size_t>(index.sample_tokens));
    if (auto st = (*reader)->ReadSample(show_sample, tokens.data()); !st.ok()) return Fail(st);
    auto tokenizer = tessera::engine::TokenizerFromJson(index.tokenizer);
    if (!tokenizer.ok()) return Fail(tokenizer.status());
    std::cout << (*tokenizer)->Decode(std::vector<uint32_t>(tokens.begin(), tokens.end())) << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera-data: tokenizes text into shards for tessera-train"};
  app.require_subcommand(1);
  tessera::engine::ConvertOptions o;
  auto* convert = app.add_subcommand("convert", "tokenize text files into a shard folder");
  convert->add_option("--input", o.inputs, "text files or folders of them")->required();
  convert->add_option("--output", o.output, "the dataset folder to write")->required();
  convert->add_option("--tokenizer", o.tokenizer, "byte or bpe (trained on the input)")
      ->capture_default_str();
  convert->add_option("--vocab-size", o.vocab_size, "BPE vocabulary size")->capture_default_str();
  convert->add_option("--tokenizer-file", o.tokenizer_file,
                      "reuse the tokenizer.json of another dataset");
  convert->add_option("--seq-len", o.seq_len, "tokens the model sees per sample")
      ->capture_default_str();
  convert->add_option("--shard-size", o.shard_bytes, "bytes per shard at most")
      ->capture_default_str();
  convert->add_flag("--overwrite", o.overwrite, "replace an existing output folder");

  std::string folder;
  bool verify = false;
  int64_t sample = -1;
  auto* inspect = app.add_subcommand("inspect", "summarize a dataset folder");
  inspect->add_option("folder", folder, "a folder written by convert")->required();
  inspect->add_flag("--verify", verify, "check every shard against its hash");
  inspect->add_option("--sample", sample, "print this sample decoded");
  CLI11_PARSE(app, argc, argv);

  if (*inspect) return Inspect(folder, verify, sample);
  auto summary = tessera::engine::ConvertText(o);
  if (!summary.ok()) return Fail(summary.status());
  std::cout << absl::StrFormat(
      "tessera-data: %d documents (%d bytes) -> %d tokens -> %d samples of %d tokens in %d shards "
      "under %s (tokenizer %s, vocab %d)\n",
      summary->documents, summary->input_bytes, summary->index.total_tokens,
      summary->index.total_samples, summary->index.sample_tokens, summary->index.shards.size(),
      o.output, summary->index.tokenizer.value("kind", "?"),
      summary->index.tokenizer.value("vocab_size", 0));
  return 0;
}
