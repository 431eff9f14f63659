#pragma once
// One rank's shard of a checkpoint: a 64-byte header, then each array's elements
// [offset, offset + count) of the flat buffer as float32. Written through a temporary name,
// hashed as it is written, flushed and renamed: a shard file that exists is complete.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/checkpoint/manifest.h"

namespace tessera::engine {

inline constexpr int64_t kShardHeaderBytes = 64;

struct ShardPayload {
  int64_t offset = 0;
  int64_t count = 0;
  std::vector<const float*> arrays;  // each `count` elements
};

// Writes `payload` as shard `index` of `step` into `folder`; returns its record.
absl::StatusOr<ShardRecord> WriteShardFile(const std::string& folder, int index, int shard_count,
                                           int64_t step, int64_t numel,
                                           const ShardPayload& payload);

std::string ShardFileName(int index, int shard_count);

// Reads elements [begin, end) of array `array` of the flat buffer from the shards of the
// checkpoint in `folder` into `out`, whatever the shards' boundaries (so a checkpoint loads on
// any number of ranks).
absl::Status ReadFlatRange(const std::string& folder, const CheckpointManifest& manifest, int array,
                           int64_t begin, int64_t end, float* out);

// Checks that every shard file is there with its recorded size and, when `hashes` is set, its
// recorded content hash. The error names the file and what is wrong.
absl::Status ValidateShards(const std::string& folder, const CheckpointManifest& manifest,
                            bool hashes);

}  // namespace tessera::engine
