#pragma once
// tessera-train's configuration: a YAML (or JSON) file, normally the run's `parameters` as the
// worker writes them to $PARAMETERS. Field names follow Composer and LLM Foundry where they have
// one. Unknown fields and bad values are errors that name the field and its line; strings may
// use ${VAR} for environment variables (save_folder: ${TESSERA_SHARED_DIR}/ckpt/${RUN_NAME}).

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "worker/engine/data/sample_order.h"

namespace tessera::engine {

// A length of training: batches ("50ba") or epochs ("2ep").
struct TrainDuration {
  enum class Unit { kBatches, kEpochs };
  int64_t value = 0;
  Unit unit = Unit::kBatches;
  // In batches, given an epoch's length.
  int64_t Batches(int64_t batches_per_epoch) const {
    return unit == Unit::kBatches ? value : value * batches_per_epoch;
  }
  std::string ToString() const;
};
absl::StatusOr<TrainDuration> ParseTrainDuration(const std::string& text);

struct ModelConfig {
  std::string preset = "tiny";  // tiny, 125m, 350m, 1b, 7b, moe-tiny, dbrx-small
  int64_t d_model = 0;
  int64_t n_heads = 0;
  int64_t n_layers = 0;
  int64_t max_seq_len = 0;  // 0: the dataset's
  int64_t vocab_size = 0;   // 0: the dataset tokenizer's
  double mlp_ratio = 4.0;
  double dropout = 0.0;
  double init_std = 0.02;
  // Mixture of experts (model/moe.h): every block's MLP becomes this many experts, each token
  // going to its top k. 0: a dense MLP.
  int64_t moe_num_experts = 0;
  int64_t moe_top_k = 0;  // 0: the preset's, else 1
  // The load-balancing loss's weight in what is trained (its mean over the blocks); DBRX's.
  double moe_loss_weight = 0.05;
  // Expert parallelism: groups of this many consecutive ranks split each block's experts, each
  // rank computing its share of them for the whole group's tokens (exchanged all-to-all).
  // Parallelism, not shape: checkpoints do not depend on it. 1: every rank computes every expert.
  int64_t moe_world_size = 1;

  bool is_moe() const { return moe_num_experts > 0; }
  nlohmann::json ToJson() const;
  // What a checkpoint's parameters depend on: loading needs the same value.
  std::string ShapeHash() const;
};

// The preset's shape; fields already set (non-zero) in `model` win.
absl::Status ApplyModelPreset(ModelConfig& model);

struct OptimizerConfig {
  double lr = 6e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

struct SchedulerConfig {
  int64_t warmup_batches = 0;  // t_warmup
  double alpha_f = 0.1;        // the final learning rate as a fraction of lr
};

// Rolling back on a bad loss: the step's loss is NaN or infinite (`on_nan`), or above
// `spike_factor` x the median of the last `window` losses (0: spikes are not looked for). The
// run goes back to its newest committed checkpoint and trains on, skipping the batch that gave
// the bad loss; after `max_rollbacks` rollbacks a bad loss fails the run as it does without.
struct LossRollbackConfig {
  bool on_nan = false;
  double spike_factor = 0;
  int window = 20;
  int max_rollbacks = 3;
  bool enabled() const { return on_nan || spike_factor > 0; }
};

// As FSDP's strategies: FULL_SHARD shards parameters, gradients and optimizer state (ZeRO-3),
// SHARD_GRAD_OP keeps the parameters gathered between steps (ZeRO-2), HYBRID_SHARD is
// FULL_SHARD within groups of shard_group_size ranks, replicated across them (HSDP), NO_SHARD
// replicates everything (DDP). parameter_sharding.h says how.
enum class Sharding { kFullShard, kShardGradOp, kHybridShard, kNoShard };
std::string ShardingName(Sharding s);

struct TrainConfig {
  ModelConfig model;
  std::string data_path;
  ShuffleOptions shuffle;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  TrainDuration max_duration{100, TrainDuration::Unit::kBatches};
  int64_t global_train_batch_size = 8;
  int64_t device_train_microbatch_size = 0;  // 0: the rank's whole share of the batch
  double gradient_clipping = 1.0;            // max global norm; 0: none
  LossRollbackConfig loss_rollback;
  std::string precision = "fp32";  // fp32 | amp_bf16 (GPUs)
  uint64_t seed = 17;
  Sharding sharding = Sharding::kFullShard;
  int shard_group_size = 0;  // HYBRID_SHARD: ranks per shard group (0: LOCAL_WORLD_SIZE)
  // Blocks 0, k, 2k, ... recompute their activations in backward (fsdp.activation_checkpointing,
  // fsdp.activation_checkpointing_interval: k); 0: none.
  int activation_checkpointing_interval = 0;
  std::string save_folder;  // empty: no checkpoints
  TrainDuration save_interval{0, TrainDuration::Unit::kBatches};
  // Between disk checkpoints, a snapshot every this often in the nodes' memory, each rank's
  // shard also on a buddy node (memory_checkpointer.h); 0: none. Needs a save_folder (a
  // recovered snapshot is committed there) and a worker that gives the node a memory folder.
  TrainDuration memory_checkpoint_interval{0, TrainDuration::Unit::kBatches};
  int num_checkpoints_to_keep = 0;  // 0: keep all
  bool save_in_background = true;
  bool autoresume = true;
  double save_commit_timeout_seconds = 600;
  int64_t log_interval = 1;     // batches between progress lines on rank 0
  int threads = 0;              // intra-op threads per rank; 0: cores / local ranks
  std::string device = "auto";  // auto | cpu | cuda
};

// Parses `text`; `source` (a path) prefixes errors. `env` resolves ${VAR}.
absl::StatusOr<TrainConfig> ParseTrainConfig(const std::string& text, const std::string& source,
                                             const std::map<std::string, std::string>& env);

// Replaces ${NAME} by env's value; an unknown name is an error naming it.
absl::StatusOr<std::string> ExpandVariables(const std::string& text,
                                            const std::map<std::string, std::string>& env);

}  // namespace tessera::engine
