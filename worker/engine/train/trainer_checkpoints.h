#pragma once
// The trainer's checkpoints, one role apart from its loop: the save folder claimed by this
// attempt, sharded saves (in the background), in-memory snapshots between them, and the way back
// (the newest checkpoint at a resumption, first from the nodes' memory where a newer step
// survives there; an older one for a loss rollback). It reads and writes the shards of the
// parameters and the optimizer; where training stands (step, data, rollbacks) the trainer gives
// it as a TrainingPosition and takes back from the manifest a load returns.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/checkpoint/checkpoint_folder.h"
#include "worker/engine/checkpoint/checkpoint_saver.h"
#include "worker/engine/dist/peer_waits.h"
#include "worker/engine/train/memory_checkpointer.h"
#include "worker/engine/train/parameter_sharding.h"
#include "worker/engine/train/rank_context.h"
#include "worker/engine/train/shard_groups.h"
#include "worker/engine/train/sharded_adamw.h"
#include "worker/engine/train/train_config.h"

namespace tessera::engine {

// Where training stands, besides the arrays: what a checkpoint records of it.
struct TrainingPosition {
  int64_t step = 0;
  int64_t tokens_seen = 0;
  DataState data;  // the dataset position after `step` batches
  int loss_rollbacks = 0;
  std::vector<DataState> skipped_batches;
};

class TrainerCheckpoints {
 public:
  // For a config with a save_folder: claims it for this attempt (rank 0, when a worker started
  // the run) and joins the commit channel. Everything given must outlive the result.
  static absl::StatusOr<std::unique_ptr<TrainerCheckpoints>> Create(
      const TrainConfig& config, const RankContext& ctx, ShardGroups& groups, PeerWaits* waits,
      torch::Device device, ParameterSharding& parameters, ShardedAdamW& optimizer);
  ~TrainerCheckpoints();

  // At a resumption: loads the newest checkpoint, from the nodes' memory where a newer step than
  // the save folder's survives there (memory_checkpointer.h), else from disk. Its manifest, or
  // none when there is no checkpoint to load.
  absl::StatusOr<std::optional<CheckpointManifest>> Resume();
  // Loads the newest committed checkpoint (every rank the one rank 0 chose, hashes checked) of
  // a step no later than `max_step` (a rollback goes back, never to another run's later steps).
  absl::StatusOr<std::optional<CheckpointManifest>> LoadNewest(int64_t max_step = INT64_MAX);

  // Saves the current shards at `now`; `background` writes them on the saver's thread.
  absl::Status Save(const TrainingPosition& now, bool background);
  // Keeps the current shards at `now` in the nodes' memory, when the config asks for it and the
  // worker gives the run a memory folder. A failed snapshot is logged by the checkpointer and
  // costs only itself.
  void SnapshotInMemory(const TrainingPosition& now);
  bool keeps_memory() const { return memory_ != nullptr; }
  // Waits for a background save; returns its result.
  absl::Status Wait() { return saver_->Wait(); }

  // The step of the newest save (or load), -1 before any.
  int64_t last_saved_step() const { return last_saved_step_; }
  // The newest step this rank committed (rank 0 only), -1 before the first.
  int64_t last_committed_step() const { return saver_->last_committed_step(); }
  CheckpointSaver* saver() { return saver_.get(); }

 private:
  TrainerCheckpoints(const TrainConfig& config, const RankContext& ctx, ShardGroups& groups,
                     torch::Device device, ParameterSharding& parameters, ShardedAdamW& optimizer);
  // What a checkpoint must be for this trainer to load it, no later than `max_step`.
  CheckpointFolder::Compatible Compatible(int64_t max_step) const;
  // The manifest at `now`, but its shards.
  CheckpointManifest ManifestAt(const TrainingPosition& now) const;
  // This rank's shard of each array, [0, shard_count) of the flat buffer's shard.
  std::vector<torch::Tensor> ShardArrays() const;

  const TrainConfig& config_;
  const RankContext& ctx_;
  ShardGroups& groups_;
  torch::Device device_;
  ParameterSharding& parameters_;
  ShardedAdamW& optimizer_;
  CheckpointFolder folder_;  // with this attempt's claim, when a worker started the run
  std::unique_ptr<CommitChannel> commit_channel_;
  std::unique_ptr<CheckpointSaver> saver_;
  std::unique_ptr<MemoryCheckpointer> memory_;  // none without memory checkpoints
  int64_t last_saved_step_ = -1;
};

}  // namespace tessera::engine
