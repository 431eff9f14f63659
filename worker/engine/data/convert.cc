#include "worker/engine/data/convert.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "worker/engine/data/tokenizer.h"

namespace tessera::engine {
namespace fs = std::filesystem;

absl::StatusOr<std::vector<std::string>> ExpandInputs(const std::vector<std::string>& inputs) {
  if (inputs.empty()) return absl::InvalidArgumentError("--input: at least one file or folder");
  std::vector<std::string> files;
  std::set<std::string> seen;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    const std::string canonical = fs::canonical(p, ec).string();
    if (!ec && seen.insert(canonical).second) files.push_back(p.string());
  };
  for (const auto& input : inputs) {
    std::error_code ec;
    const auto status = fs::status(input, ec);
    if (ec || !fs::exists(status)) {
      return absl::NotFoundError(absl::StrCat("--input ", input, ": no such file or folder"));
    }
    if (fs::is_regular_file(status)) {
      add(input);
      continue;
    }
    if (!fs::is_directory(status)) {
      return absl::InvalidArgumentError(absl::StrCat("--input ", input, ": not a file or folder"));
    }
    std::vector<fs::path> found;
    for (auto it = fs::recursive_directory_iterator(input, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_regular_file(ec)) found.push_back(it->path());
    }
    if (ec) return absl::UnavailableError(absl::StrCat("--input ", input, ": ", ec.message()));
    std::sort(found.begin(), found.end());
    for (const auto& p : found) add(p);
  }
  if (files.empty()) return absl::InvalidArgumentError("--input: no files found");
  return files;
}

absl::StatusOr<ConvertSummary> ConvertText(const ConvertOptions& o) {
  if (o.seq_len < 1) return absl::InvalidArgumentError("--seq-len: must be at least 1");
  if (o.shard_bytes < 1) return absl::InvalidArgumentError("--shard-size: must be positive");
  if (o.output.empty()) return absl::InvalidArgumentError("--output: required");
  TESSERA_ASSIGN_OR_RETURN(const auto files, ExpandInputs(o.inputs));
  std::error_code ec;
  if (fs::exists(o.output, ec) && !fs::is_empty(o.output, ec) && !o.overwrite) {
    return absl::AlreadyExistsError(
        absl::StrCat("--output ", o.output, ": exists and is not empty (--overwrite replaces it)"));
  }
  if (o.overwrite) fs::remove_all(o.output, ec);
  TESSERA_RETURN_IF_ERROR(MakeFolders(o.output));

  ConvertSummary summary;
  std::vector<std::string> texts;
  for (const auto& f : files) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(f));
    summary.input_bytes += static_cast<int64_t>(text.size());
    texts.push_back(std::move(text));
  }
  summary.documents = static_cast<int64_t>(texts.size());

  std::unique_ptr<Tokenizer> tokenizer;
  if (!o.tokenizer_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(const std::string saved, ReadWholeFile(o.tokenizer_file));
    auto json = nlohmann::json::parse(saved, nullptr, false);
    if (json.is_discarded()) {
      return absl::InvalidArgumentError(absl::StrCat(o.tokenizer_file, ": not valid JSON"));
    }
    auto loaded = TokenizerFromJson(json);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(o.tokenizer_file, ": ", loaded.status().message()));
    }
    tokenizer = *std::move(loaded);
  } else if (o.tokenizer == "byte") {
    tokenizer = MakeByteTokenizer();
  } else if (o.tokenizer == "bpe") {
    auto trained = TrainBpeTokenizer(texts, o.vocab_size);
    if (!trained.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", trained.status().message()));
    }
    tokenizer = *std::move(trained);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokenizer: must be byte or bpe, not \"", o.tokenizer, "\""));
  }
  TESSERA_RETURN_IF_ERROR(
      WriteFileDurably(o.output + "/tokenizer.json", tokenizer->ToJson().dump() + "\n"));

  const int token_bytes = tokenizer->vocab_size() <= 65536 ? 2 : 4;
  const int64_t sample_tokens = o.seq_len + 1;
  ShardWriter writer(o.output, sample_tokens, token_bytes,
                     o.shard_bytes / (sample_tokens * token_bytes));
  std::vector<uint32_t> sample;
  sample.reserve(static_cast<size_t>(sample_tokens));
  int64_t total_tokens = 0;
  for (const auto& text : texts) {
    std::vector<uint32_t> ids = tokenizer->Encode(text);
    ids.push_back(tokenizer->eos_id());  // documents are separated by end-of-document
    total_tokens += static_cast<int64_t>(ids.size());
    for (uint32_t id : ids) {
      sample.push_back(id);
      if (static_cast<int64_t>(sample.size()) == sample_tokens) {
        TESSERA_RETURN_IF_ERROR(writer.Add(sample));
        sample.clear();
      }
    }
  }
  TESSERA_ASSIGN_OR_RETURN(summary.index, writer.Finish(tokenizer->ToJson(), total_tokens));
  return summary;
}

}  // namespace tessera::engine
