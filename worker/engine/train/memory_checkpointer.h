#pragma once
// The ranks' side of in-memory checkpoints (memory_checkpoints.h has the node's): every K steps
// each writing rank keeps its shard in its node's memory and, in one all-to-all over the world,
// sends a copy to its buddy, the rank of the same local rank on the next node (rank + ranks per
// node), which keeps it in its own node's memory. A node lost takes its own copies with it, and
// its shards survive on the node before it. On one node there is no buddy: the node's copies
// survive its ranks' crash, not the node's loss.
//
// At a resumption, before the disk checkpoint is chosen, Recover gathers every node's
// inventory, and where a step newer than the newest on disk survives whole, its holders copy its
// shards into the save folder and rank 0 commits it there; the trainer then loads it as it loads
// any checkpoint, hashes checked.

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/checkpoint/checkpoint_folder.h"
#include "worker/engine/checkpoint/checkpoint_saver.h"
#include "worker/engine/checkpoint/memory_checkpoints.h"
#include "worker/engine/dist/communicator.h"
#include "worker/engine/train/rank_context.h"

namespace tessera::engine {

class MemoryCheckpointer {
 public:
  // `world` must outlive this; `role` says which shard this rank keeps (SaveRole's fields).
  MemoryCheckpointer(MemoryCheckpointStore store, Communicator& world, const RankContext& ctx,
                     SaveRole role, torch::Device device);

  // Keeps this rank's shard of `manifest.step` (`arrays`: elements [offset, offset + count) of
  // each flat array, on the training device) here and on the buddy's node. Every rank calls it
  // at the same step. A failure (a node's memory full, say) loses this snapshot only, is
  // logged once per attempt, and training goes on; the status is the snapshot's.
  absl::Status Snapshot(const CheckpointManifest& manifest,
                        const std::vector<torch::Tensor>& arrays, int64_t offset);

  // Every rank, before the disk checkpoint is chosen: true when a step newer than `folder`'s
  // newest committed one survived in the nodes' memory and is now committed in `folder`
  // (which must carry this attempt's claim). `compatible` as for the disk's checkpoints.
  absl::StatusOr<bool> Recover(const CheckpointFolder& folder,
                               const CheckpointFolder::Compatible& compatible);

  // The rank this one sends its copies to; itself where the world is one node.
  int buddy() const;

 private:
  // Snapshot's work: here, then by the all-to-all on the buddy's node.
  absl::Status KeepEverywhere(const CheckpointManifest& manifest,
                              const std::vector<torch::Tensor>& arrays, int64_t offset);
  // Every rank's `mine`, in rank order.
  std::vector<std::string> AllGatherText(const std::string& mine);
  absl::Status Keep(const CheckpointManifest& manifest, int index, const torch::Tensor& flat,
                    int64_t offset, int64_t count) const;

  MemoryCheckpointStore store_;
  Communicator& world_;
  RankContext ctx_;
  SaveRole role_;
  torch::Device device_;
  int64_t last_step_ = -1;  // this attempt's previous snapshot
  bool warned_ = false;     // a failed snapshot is said once per attempt
};

}  // namespace tessera::engine
