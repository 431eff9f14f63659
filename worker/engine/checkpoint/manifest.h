#pragma once
// A checkpoint's manifest: what a step's shards hold and everything else a resumed run needs.
// Writing manifest.json into a step's folder is what commits that step; a folder without one
// is a save that did not finish and is never loaded.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/data/streaming_dataset.h"

namespace tessera::engine {

inline constexpr char kManifestFile[] = "manifest.json";
inline constexpr char kLatestFile[] = "latest";

// One shard file: elements [offset, offset + count) of every array of the flat buffer.
struct ShardRecord {
  int index = 0;
  std::string file;
  int64_t offset = 0;
  int64_t count = 0;
  int64_t bytes = 0;
  std::string hash;  // XXH3-128 of the whole file
  bool operator==(const ShardRecord&) const = default;
};

struct CheckpointManifest {
  int64_t step = 0;
  int world_size = 0;               // ranks of the run that saved it
  std::string sharding;             // FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD or NO_SHARD
  int shard_group_size = 0;         // ranks that share one copy of the parameters
  int64_t numel = 0;                // elements of the flat parameter buffer (without padding)
  std::vector<std::string> arrays;  // what each shard holds, in order: params, exp_avg, ...
  std::vector<ShardRecord> shards;  // sorted by offset, covering [0, numel) exactly
  DataState data;                   // the dataset position after `step` batches
  // Loss rollbacks so far, and the batches they skip (trainer.h): kept so that a resumed run
  // skips them too and counts towards the same limit.
  int loss_rollbacks = 0;
  std::vector<DataState> skipped_batches;
  int64_t tokens_seen = 0;
  uint64_t seed = 0;        // dropout and other randomness derive from (seed, step, rank)
  std::string config_hash;  // the model's shape: a checkpoint loads only into the same shape
  nlohmann::json model;     // the model config, for people reading the manifest
  std::string saved_at;     // RFC 3339

  nlohmann::json ToJson() const;
  static absl::StatusOr<CheckpointManifest> FromJson(const nlohmann::json& json,
                                                     const std::string& source);
  // The same for one shard's view of a step (an in-memory checkpoint's): `shards` need not
  // cover the buffer.
  static absl::StatusOr<CheckpointManifest> PartFromJson(const nlohmann::json& json,
                                                         const std::string& source);
  // The shards tile [0, numel) without gaps or overlaps.
  absl::Status CheckCoverage() const;
};

}  // namespace tessera::engine
