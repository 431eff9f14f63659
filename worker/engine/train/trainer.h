#pragma once
// tessera-train's training loop: a GPT over a streaming dataset with sharded data parallelism
// (FULL_SHARD and HYBRID_SHARD per block, SHARD_GRAD_OP, NO_SHARD: parameter_sharding.h),
// sharded checkpoints saved in the background, and autoresume from the newest committed
// checkpoint on any number of ranks.
//
// One step: each rank runs forward and backward over its slice of the global batch (in
// microbatches; the sharding gathers parameters as the blocks need them), gradients are reduced
// to their owners, the global norm is clipped, each owner updates its shard with AdamW, and the
// sharding makes the update visible to the next forward.

#include <torch/torch.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/data/streaming_dataset.h"
#include "worker/engine/dist/peer_waits.h"
#include "worker/engine/model/gpt.h"
#include "worker/engine/train/loss_rollback.h"
#include "worker/engine/train/parameter_sharding.h"
#include "worker/engine/train/progress_report.h"
#include "worker/engine/train/rank_context.h"
#include "worker/engine/train/shard_groups.h"
#include "worker/engine/train/sharded_adamw.h"
#include "worker/engine/train/train_config.h"
#include "worker/engine/train/trainer_checkpoints.h"
#include "worker/progress/progress_file.h"

namespace tessera::engine {

class Trainer {
 public:
  // Opens the data, builds the model, joins the other ranks and, with autoresume, loads the
  // newest committed checkpoint.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(TrainConfig config, RankContext context);
  ~Trainer();

  // Trains until max_duration; saves on save_interval and at the end.
  absl::Status Run();
  // One optimizer step (exposed for benchmarks).
  absl::StatusOr<StepResult> Step();
  // Saves the current step (exposed for benchmarks); `background` as the config's default.
  absl::Status Save(bool background);

  int64_t step() const { return step_; }
  int64_t total_steps() const { return total_steps_; }
  int64_t resumed_from_step() const { return resumed_from_step_; }
  const DataState& data_state() const { return data_state_; }
  // None without a save_folder.
  CheckpointSaver* saver() { return checkpoints_ ? checkpoints_->saver() : nullptr; }
  const ParameterSharding& parameters() const { return *parameters_; }
  double flops_per_token() const { return flops_per_token_; }

 private:
  Trainer(TrainConfig config, RankContext context);
  // Setup's steps, in its order: threads, device and precision; the data and the batch shape;
  // the shard groups (ShardGroups::Join); the model, optimizer and progress report; the
  // checkpoints (and the resumption); the shape logged by rank 0.
  absl::Status Setup();
  absl::Status SetupDevice();
  absl::Status SetupData();
  // The model's FLOPs per token; returns this rank's peak FLOP/s for MFU (0: unknown, no MFU).
  double SetupFlops();
  void SetupModel(double peak_flops_per_rank);
  absl::Status SetupCheckpoints();
  void LogShape() const;
  // What rank 0 says at the end: MoE routing, and the parameters it held.
  void LogFinish();
  // Where training stands, for a checkpoint.
  TrainingPosition Position() const;
  // Continues from a loaded checkpoint's position.
  void ContinueFrom(const CheckpointManifest& loaded);
  // Back to the newest checkpoint, `batch` (the bad step's, whose `loss` is bad for `why`) to
  // be skipped; an error (the bad loss named) where no rollback is allowed or possible.
  absl::Status RollBack(const DataState& batch, double loss, const std::string& why);

  TrainConfig config_;
  RankContext ctx_;
  torch::Device device_{torch::kCPU};
  // Before the groups, whose every blocking call marks a wait in the progress file's marker.
  std::unique_ptr<progress::ProgressReporter> progress_;
  std::unique_ptr<PeerWaits> peer_waits_;
  std::unique_ptr<ShardGroups> groups_;
  std::unique_ptr<StreamingDataset> dataset_;
  Gpt model_{nullptr};
  std::unique_ptr<ParameterSharding> parameters_;
  std::unique_ptr<ShardedAdamW> optimizer_;
  std::unique_ptr<ProgressReport> report_;
  std::unique_ptr<TrainerCheckpoints> checkpoints_;  // none without a save_folder
  std::vector<int64_t> batch_buffer_;

  int64_t step_ = 0;
  LossRollback rollback_{config_.loss_rollback};
  DebugBadBatches bad_batches_ = DebugBadBatches::FromEnvironment();
  int64_t total_steps_ = 0;
  int64_t resumed_from_step_ = 0;
  int64_t tokens_seen_ = 0;
  DataState data_state_;
  int64_t seq_len_ = 0;
  double flops_per_token_ = 0;
};

}  // namespace tessera::engine
