#pragma once
// The on-disk dataset format of tessera-data, in the spirit of MosaicML Streaming's MDS: a folder
// of shards of fixed-size samples (token ids, little-endian uint16 or uint32) and an index.json
// that lists every shard with its sample count, byte size and content hash, plus the tokenizer.
// A reader checks sizes when it opens the folder and each shard's hash when it first loads it.

#include <cstdint>
#include <list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::engine {

inline constexpr char kDatasetIndexFile[] = "index.json";

struct ShardInfo {
  std::string file;  // relative to the dataset folder
  int64_t samples = 0;
  int64_t bytes = 0;
  std::string hash;  // XXH3-128, hex
};

struct DatasetIndex {
  int64_t sample_tokens = 0;  // tokens per sample: the model's sequence length plus one
  int token_bytes = 2;        // 2 (uint16) or 4 (uint32)
  int64_t total_samples = 0;
  int64_t total_tokens = 0;  // tokens the corpus had before it was cut into samples
  nlohmann::json tokenizer;  // Tokenizer::ToJson()
  std::vector<ShardInfo> shards;

  nlohmann::json ToJson() const;
  // `source` names the file in errors ("/data/index.json: shards[2].samples: ...").
  static absl::StatusOr<DatasetIndex> FromJson(const nlohmann::json& json,
                                               const std::string& source);
};

// Writes samples into shards of at most `samples_per_shard` samples, then the index.
class ShardWriter {
 public:
  ShardWriter(std::string folder, int64_t sample_tokens, int token_bytes,
              int64_t samples_per_shard);
  absl::Status Add(const std::vector<uint32_t>& sample);
  // Closes the last shard and writes index.json (written last: a folder without it is not a
  // dataset).
  absl::StatusOr<DatasetIndex> Finish(const nlohmann::json& tokenizer, int64_t total_tokens);

 private:
  absl::Status FlushShard();
  std::string folder_;
  DatasetIndex index_;
  int64_t samples_per_shard_;
  std::string pending_;  // the current shard's bytes
  int64_t pending_samples_ = 0;
};

// Reads samples by their global id (shards in index order). Keeps the last few shards loaded.
class TokenShardReader {
 public:
  static absl::StatusOr<std::unique_ptr<TokenShardReader>> Open(const std::string& folder,
                                                                size_t cached_shards = 4);
  const DatasetIndex& index() const { return index_; }
  const std::string& folder() const { return folder_; }
  // Copies sample `id`'s tokens into `out` (index().sample_tokens values).
  absl::Status ReadSample(int64_t id, int64_t* out);
  // Samples in each shard, in index order.
  std::vector<int64_t> ShardSampleCounts() const;

 private:
  struct LoadedShard {
    size_t shard = 0;
    std::string bytes;
  };
  TokenShardReader(std::string folder, DatasetIndex index, size_t cached_shards);
  absl::StatusOr<const LoadedShard*> Load(size_t shard);

  std::string folder_;
  DatasetIndex index_;
  std::vector<int64_t> first_sample_;  // global id of each shard's first sample
  size_t cached_shards_;
  std::list<LoadedShard> loaded_;  // most recently used first
};

}  // namespace tessera::engine
