#pragma once
// In-memory checkpoints, the node's side. Between disk checkpoints, every K steps each writing
// rank keeps its shard in its node's memory (a folder on tmpfs that the worker gives the run as
// TESSERA_MEMORY_CHECKPOINT_DIR) and sends a copy to a buddy rank on another node, which keeps
// it in its node's memory (memory_checkpointer.h). After a node is lost, the next attempt
// gathers what every node it runs on holds, picks the newest step whose shards all survive
// (ChooseMemoryCheckpoint), has their holders copy them into the save folder, commits that step
// and resumes from it like any disk checkpoint: fewer steps recomputed than from the newest disk
// checkpoint, and a checkpoint that later resumptions find too.
//
// A snapshot is the disk format in another folder: step-NNNNNNNN/ holds shard files (shard_file.h)
// and beside each a .json naming the step's manifest with that one shard. Both are written
// through temporary names, the JSON last, so a shard that the inventory lists is whole.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/checkpoint/checkpoint_folder.h"
#include "worker/engine/checkpoint/manifest.h"
#include "worker/engine/checkpoint/shard_file.h"

namespace tessera::engine {

// One shard that a node holds: the step's manifest with this shard alone in `shards`.
struct MemoryShard {
  CheckpointManifest manifest;
  int shard_count = 0;
};

class MemoryCheckpointStore {
 public:
  // `byte_limit` bounds the folder's contents (0: no limit).
  MemoryCheckpointStore(std::string folder, int64_t byte_limit)
      : folder_(std::move(folder)), byte_limit_(byte_limit) {}
  const std::string& folder() const { return folder_; }

  // Keeps shard `index` of `shard_count` of `manifest.step` (whose `shards` are ignored).
  // RESOURCE_EXHAUSTED, writing nothing, when it would take the folder past its byte limit.
  absl::Status Put(const CheckpointManifest& manifest, int index, int shard_count,
                   const ShardPayload& payload) const;
  // Deletes every step's folder except those of `keep` (the snapshot being written and the one
  // before it: the newest whole one while the new one is written).
  void DropAllBut(const std::vector<int64_t>& keep) const;
  // Every whole shard in the folder, newest step first. Unreadable entries are skipped (a
  // warning names them): a lost snapshot only means resuming from an older step.
  std::vector<MemoryShard> Inventory() const;
  // Where shard `file` of `step` is.
  std::string ShardPath(int64_t step, const std::string& file) const;
  // Bytes of the files in the folder.
  int64_t BytesUsed() const;

 private:
  std::string folder_;
  int64_t byte_limit_ = 0;
};

// A step whose every shard some node holds.
struct MemoryRecovery {
  CheckpointManifest manifest;  // with every shard, sorted by offset
  std::vector<int> holders;     // for each of manifest.shards, the inventory that holds it
};

// The newest step of `inventories` (one per node, in a fixed order) newer than `newer_than`
// whose shards are all held by some node, agree on everything but their own range and are
// accepted by `compatible`; the first inventory holding a shard is its holder. Steps passed
// over and why go to `refused` (a step newer than the chosen one that missed a shard, say).
std::optional<MemoryRecovery> ChooseMemoryCheckpoint(
    const std::vector<std::vector<MemoryShard>>& inventories, int64_t newer_than,
    const CheckpointFolder::Compatible& compatible, std::vector<std::string>* refused);

// Inventories as text (JSON), to travel between ranks, and back. A malformed one is an error.
std::string EncodeInventory(const std::vector<MemoryShard>& inventory);
absl::StatusOr<std::vector<MemoryShard>> DecodeInventory(const std::string& text);

// Copies `from` (a shard file) into `to_folder` under the same name, durably: through a
// temporary name, synced, renamed.
absl::Status CopyShardDurably(const std::string& from, const std::string& to_folder);

}  // namespace tessera::engine
