#pragma once
// tessera-data convert: text files to a folder of token shards (see token_shards.h).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/data/token_shards.h"

namespace tessera::engine {

struct ConvertOptions {
  // Files, or folders whose regular files are read (recursively, in name order).
  std::vector<std::string> inputs;
  std::string output;
  std::string tokenizer = "byte";  // byte | bpe
  uint32_t vocab_size = 4096;      // for bpe
  std::string tokenizer_file;      // reuse a saved tokenizer instead of training one
  int64_t seq_len = 128;           // samples hold seq_len + 1 tokens
  int64_t shard_bytes = 32 << 20;
  bool overwrite = false;
};

struct ConvertSummary {
  int64_t documents = 0;
  int64_t input_bytes = 0;
  DatasetIndex index;
};

absl::StatusOr<ConvertSummary> ConvertText(const ConvertOptions& options);

// The input files in reading order: folders expanded, duplicates (the same file reached twice,
// through a link) dropped.
absl::StatusOr<std::vector<std::string>> ExpandInputs(const std::vector<std::string>& inputs);

}  // namespace tessera::engine
