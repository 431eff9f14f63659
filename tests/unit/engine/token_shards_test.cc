#include "worker/engine/data/token_shards.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"
#include "worker/engine/data/convert.h"
#include "worker/engine/data/tokenizer.h"

namespace tessera::engine {
namespace token_shards_test {
using tessera::testing::TempDir;

// 10 samples of 4 tokens, 3 per shard: sample i holds i*10 + t.
DatasetIndex WriteDataset(const std::string& folder, int token_bytes = 2) {
  ShardWriter w(folder, 4, token_bytes, 3);
  for (uint32_t i = 0; i < 10; ++i) {
    // The last token needs 17 bits where the shard holds 4-byte tokens.
    const uint32_t wide = 70000u % (token_bytes == 2 ? 65536u : 1u << 30);
    REQUIRE(w.Add({i * 10, i * 10 + 1, i * 10 + 2, wide}).ok());
  }
  auto index = w.Finish(MakeByteTokenizer()->ToJson(), 40);
  REQUIRE(index.ok());
  return *index;
}

TEST_CASE("shards hold every sample, read back by global id") {
  TempDir tmp;
  const auto index = WriteDataset(tmp.path);
  CHECK(index.shards.size() == 4);
  CHECK(index.total_samples == 10);
  auto reader = TokenShardReader::Open(tmp.path);
  REQUIRE(reader.ok());
  CHECK((*reader)->ShardSampleCounts() == std::vector<int64_t>{3, 3, 3, 1});
  int64_t tokens[4];
  for (int64_t i : {0, 2, 3, 7, 9, 1}) {
    REQUIRE((*reader)->ReadSample(i, tokens).ok());
    CHECK(tokens[0] == i * 10);
    CHECK(tokens[2] == i * 10 + 2);
  }
  CHECK((*reader)->ReadSample(10, tokens).code() == absl::StatusCode::kOutOfRange);
}

TEST_CASE("four-byte tokens for large vocabularies") {
  TempDir tmp;
  WriteDataset(tmp.path, 4);
  auto reader = TokenShardReader::Open(tmp.path);
  REQUIRE(reader.ok());
  int64_t tokens[4];
  REQUIRE((*reader)->ReadSample(5, tokens).ok());
  CHECK(tokens[3] == 70000);
}

TEST_CASE("a truncated shard is refused when the folder opens") {
  TempDir tmp;
  const auto index = WriteDataset(tmp.path);
  std::filesystem::resize_file(tmp.path + "/" + index.shards[1].file, 5);
  auto reader = TokenShardReader::Open(tmp.path);
  REQUIRE_FALSE(reader.ok());
  CHECK(reader.status().code() == absl::StatusCode::kDataLoss);
  CHECK(reader.status().message().find("shard.00001.bin: 5 bytes, but index.json says 24") !=
        std::string::npos);
}

TEST_CASE("a corrupt shard is refused when it is first read, naming the shard") {
  TempDir tmp;
  const auto index = WriteDataset(tmp.path);
  {
    std::fstream f(tmp.path + "/" + index.shards[2].file,
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put('\x7f');
  }
  auto reader = TokenShardReader::Open(tmp.path);
  REQUIRE(reader.ok());
  int64_t tokens[4];
  CHECK((*reader)->ReadSample(0, tokens).ok());
  const auto st = (*reader)->ReadSample(7, tokens);
  CHECK(st.code() == absl::StatusCode::kDataLoss);
  CHECK(st.message().find("shard.00002.bin: content hash") != std::string::npos);
  CHECK(st.message().find("corrupt") != std::string::npos);
}

TEST_CASE("index.json errors name the field") {
  TempDir tmp;
  auto index = WriteDataset(tmp.path);
  auto json = index.ToJson();
  json["shards"][1]["samples"] = -3;
  CHECK(DatasetIndex::FromJson(json, "x/index.json").status().message() ==
        "x/index.json: shards[1].samples: must be a positive integer, not -3");
  json = index.ToJson();
  json["total_samples"] = 11;
  CHECK(DatasetIndex::FromJson(json, "i").status().message().find(
            "total_samples: 11 is not the sum") != std::string::npos);
  json = index.ToJson();
  json["shards"][0]["file"] = "../etc/passwd";
  CHECK(DatasetIndex::FromJson(json, "i").status().message().find("shards[0].file") !=
        std::string::npos);
  CHECK(TokenShardReader::Open(tmp.path + "/missing").status().code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("convert tokenizes folders of text into samples of seq_len + 1 tokens") {
  TempDir tmp;
  std::string a, b;
  for (int i = 0; i < 200; ++i) a += "the quick brown fox jumps over the lazy dog. ";
  for (int i = 0; i < 100; ++i) b += "pack my box with five dozen liquor jugs! ";
  tmp.Write("text/a.txt", a);
  tmp.Write("text/sub/b.txt", b);
  ConvertOptions o;
  o.inputs = {tmp.path + "/text"};
  o.output = tmp.path + "/out";
  o.tokenizer = "bpe";
  o.vocab_size = 400;
  o.seq_len = 16;
  o.shard_bytes = 340;  // 10 samples of 17 two-byte tokens
  auto summary = ConvertText(o);
  REQUIRE(summary.ok());
  CHECK(summary->documents == 2);
  CHECK(summary->input_bytes == static_cast<int64_t>(a.size() + b.size()));
  CHECK(summary->index.sample_tokens == 17);
  CHECK(summary->index.total_samples == summary->index.total_tokens / 17);
  CHECK(summary->index.shards.size() > 1);
  CHECK(summary->index.shards[0].samples == 10);
  auto reader = TokenShardReader::Open(o.output);
  REQUIRE(reader.ok());
  auto tokenizer = TokenizerFromJson((*reader)->index().tokenizer);
  REQUIRE(tokenizer.ok());
  int64_t tokens[17];
  REQUIRE((*reader)->ReadSample(0, tokens).ok());
  const std::string first = (*tokenizer)->Decode(std::vector<uint32_t>(tokens, tokens + 17));
  CHECK(a.rfind(first, 0) == 0);  // the first sample is the start of the first file

  // An existing output is not overwritten by accident.
  auto again = ConvertText(o);
  CHECK(again.status().code() == absl::StatusCode::kAlreadyExists);
  o.overwrite = true;
  CHECK(ConvertText(o).ok());
  // Reusing the tokenizer file gives the same tokens.
  ConvertOptions reuse = o;
  reuse.output = tmp.path + "/out2";
  reuse.overwrite = false;
  reuse.tokenizer_file = o.output + "/tokenizer.json";
  auto reused = ConvertText(reuse);
  REQUIRE(reused.ok());
  CHECK(reused->index.shards[0].hash == summary->index.shards[0].hash);
}

TEST_CASE("convert refuses bad options with one clear error") {
  TempDir tmp;
  ConvertOptions o;
  o.output = tmp.path + "/out";
  o.inputs = {tmp.path + "/nope"};
  CHECK(ConvertText(o).status().message() ==
        "--input " + tmp.path + "/nope: no such file or folder");
  tmp.Write("t.txt", "short");
  o.inputs = {tmp.path + "/t.txt"};
  o.tokenizer = "sentencepiece";
  CHECK(ConvertText(o).status().message() ==
        "--tokenizer: must be byte or bpe, not \"sentencepiece\"");
  o.tokenizer = "byte";
  o.seq_len = 100;
  CHECK(ConvertText(o).status().message().find("too short for one sample of 101 tokens") !=
        std::string::npos);
}

}  // namespace token_shards_test
}  // namespace tessera::engine
