#include "worker/engine/train/train_config.h"

#include <catch2/catch.hpp>

#include "worker/engine/common/content_hash.h"
#include "worker/engine/train/lr_schedule.h"
#include "worker/engine/train/model_flops.h"
#include "worker/engine/train/rank_context.h"
#include "worker/progress/progress_file.h"

namespace tessera::engine {
namespace train_config_test {

const std::map<std::string, std::string> kEnv = {{"SHARED", "/mnt/shared"}, {"RUN_NAME", "gpt-x1"}};

absl::StatusOr<TrainConfig> Parse(const std::string& text) {
  return ParseTrainConfig(text, "train.yaml", kEnv);
}

std::string ErrorOf(const std::string& text) {
  auto c = Parse(text);
  REQUIRE_FALSE(c.ok());
  return std::string(c.status().message());
}

TEST_CASE("a full configuration parses with presets, durations and variables") {
  auto c = Parse(R"(
model:
  preset: 125m
  max_seq_len: 256
data:
  path: ${SHARED}/data
  shuffle_seed: 3
  num_canonical_nodes: 8
optimizer:
  lr: 3.0e-4
  betas: [0.9, 0.98]
  weight_decay: 0.0
scheduler:
  t_warmup: 20ba
  alpha_f: 0.0
max_duration: 2ep
global_train_batch_size: 64
device_train_microbatch_size: 4
gradient_clipping: 0.5
loss_rollback: {on_nan: true, spike_factor: 4, max_rollbacks: 2}
precision: amp_bf16
fsdp:
  sharding_strategy: HYBRID_SHARD
  shard_group_size: 8
  activation_checkpointing: true
  activation_checkpointing_interval: 2
save_folder: ${SHARED}/ckpt/${RUN_NAME}
save_interval: 50ba
memory_checkpoint_interval: 5ba
num_checkpoints_to_keep: 3
save_in_background: false
log_interval: 10ba
)");
  REQUIRE(c.ok());
  CHECK(c->model.d_model == 768);
  CHECK(c->model.n_layers == 12);
  CHECK(c->model.max_seq_len == 256);
  CHECK(c->data_path == "/mnt/shared/data");
  CHECK(c->shuffle.seed == 3);
  CHECK(c->shuffle.num_canonical_nodes == 8);
  CHECK(c->optimizer.beta2 == 0.98);
  CHECK(c->optimizer.weight_decay == 0.0);
  CHECK(c->scheduler.warmup_batches == 20);
  CHECK(c->max_duration.unit == TrainDuration::Unit::kEpochs);
  CHECK(c->max_duration.Batches(7) == 14);
  CHECK(c->sharding == Sharding::kHybridShard);
  CHECK(c->shard_group_size == 8);
  CHECK(c->activation_checkpointing_interval == 2);
  CHECK(c->loss_rollback.on_nan);
  CHECK(c->loss_rollback.spike_factor == 4.0);
  CHECK(c->loss_rollback.window == 20);
  CHECK(c->loss_rollback.max_rollbacks == 2);
  CHECK(c->save_folder == "/mnt/shared/ckpt/gpt-x1");
  CHECK(c->save_interval.Batches(1000) == 50);
  CHECK(c->memory_checkpoint_interval.Batches(1000) == 5);
  CHECK(c->num_checkpoints_to_keep == 3);
  CHECK_FALSE(c->save_in_background);
  CHECK(c->log_interval == 10);
}

TEST_CASE("mixture-of-experts presets are DBRX's routing, and a dense shape's hash is unchanged") {
  auto dbrx = Parse("data: {path: /d}\nmodel: {preset: dbrx-small}\n");
  REQUIRE(dbrx.ok());
  CHECK(dbrx->model.moe_num_experts == 16);
  CHECK(dbrx->model.moe_top_k == 4);
  CHECK(dbrx->model.moe_loss_weight == 0.05);
  auto small = Parse("data: {path: /d}\nmodel: {preset: moe-tiny, moe_loss_weight: 0.1}\n");
  REQUIRE(small.ok());
  CHECK(small->model.moe_num_experts == 8);
  CHECK(small->model.moe_top_k == 2);
  CHECK(small->model.moe_loss_weight == 0.1);
  auto top1 = Parse("data: {path: /d}\nmodel: {moe_num_experts: 4}\n");
  REQUIRE(top1.ok());
  CHECK(top1->model.moe_top_k == 1);  // MegaBlocks' default
  // The experts are in the shape; a dense model's hash is what its checkpoints were saved with.
  auto dense = Parse("data: {path: /d}\nmodel: {preset: tiny}\n");
  REQUIRE(dense.ok());
  auto tiny_moe = Parse("data: {path: /d}\nmodel: {preset: moe-tiny}\n");
  REQUIRE(tiny_moe.ok());
  CHECK(dense->model.ShapeHash() != tiny_moe->model.ShapeHash());
  ModelConfig m = dense->model;
  m.vocab_size = 0;
  CHECK(m.ShapeHash() == HashBytes("gpt-alibi/v1 d_model=64 n_heads=4 n_layers=2 vocab=0 "
                                   "mlp_hidden=256"));
  // Round trip through the manifest's JSON.
  auto again =
      Parse(nlohmann::json{{"data", {{"path", "/d"}}}, {"model", dbrx->model.ToJson()}}.dump());
  REQUIRE(again.ok());
  CHECK(again->model.ShapeHash() == dbrx->model.ShapeHash());
}

TEST_CASE("the parameters JSON the worker writes is a valid configuration") {
  auto c =
      Parse(R"({"data": {"path": "/d"}, "max_duration": "60ba", "model": {"preset": "tiny"}})");
  REQUIRE(c.ok());
  CHECK(c->model.d_model == 64);
  CHECK(c->max_duration.Batches(1) == 60);
  CHECK(c->sharding == Sharding::kFullShard);
  CHECK(c->activation_checkpointing_interval == 0);
  auto every = Parse(R"({"data": {"path": "/d"}, "fsdp": {"activation_checkpointing": true}})");
  REQUIRE(every.ok());
  CHECK(every->activation_checkpointing_interval == 1);
}

TEST_CASE("errors name the field and its line") {
  CHECK(ErrorOf("data: {path: /d}\nmax_duraton: 10ba\n")
            .find("train.yaml:2: max_duraton: unknown field") == 0);
  CHECK(ErrorOf("data: {path: /d}\nmodel:\n  n_layer: 2\n")
            .find("train.yaml:3: model.n_layer: unknown field") == 0);
  CHECK(ErrorOf("data: {path: /d}\nmax_duration: 10 steps\n") ==
        "train.yaml:2: max_duration: \"10 steps\" is not a duration: use batches (50ba) or epochs "
        "(2ep)");
  CHECK(ErrorOf("data: {path: /d}\noptimizer:\n  lr: fast\n") ==
        "train.yaml:3: optimizer.lr: must be a number, not \"fast\"");
  CHECK(ErrorOf("data: {path: /d}\noptimizer: {lr: -1}\n") ==
        "train.yaml:2: optimizer.lr: must be positive");
  CHECK(ErrorOf("max_duration: 10ba\n").find("data: required") != std::string::npos);
  CHECK(ErrorOf("data:\n  path: ${NOPE}/x\n") ==
        "train.yaml:2: data.path: \"${NOPE}/x\": the environment variable NOPE is not set");
  CHECK(ErrorOf("data: {path: /d}\nmodel: {preset: 70b}\n") ==
        "train.yaml:2: model.preset: must be tiny, 125m, 350m, 1b, 7b, moe-tiny or dbrx-small, not "
        "\"70b\"");
  CHECK(ErrorOf("data: {path: /d}\nmodel: {d_model: 100, n_heads: 3}\n")
            .find("model.d_model: 100 is not a multiple of n_heads (3)") != std::string::npos);
  CHECK(ErrorOf("data: {path: /d}\nmodel: {moe_num_experts: 4, moe_top_k: 5}\n") ==
        "train.yaml:2: model.moe_top_k: 5 is more than moe_num_experts (4)");
  CHECK(ErrorOf("data: {path: /d}\nmodel: {moe_top_k: 2}\n") ==
        "train.yaml:2: model.moe_top_k: needs moe_num_experts (the model is dense)");
  CHECK(ErrorOf("data: {path: /d}\nmodel: {moe_num_experts: -1}\n") ==
        "train.yaml:2: model.moe_num_experts: must be 0 (dense) or more");
  CHECK(ErrorOf("data: {path: /d}\nmodel: {moe_num_experts: 8, moe_world_size: 3}\n") ==
        "train.yaml:2: model.moe_world_size: 3 does not divide moe_num_experts (8)");
  CHECK(ErrorOf("data: {path: /d}\nmodel: {moe_world_size: 2}\n") ==
        "train.yaml:2: model.moe_world_size: needs moe_num_experts (the model is dense)");
  CHECK(ErrorOf("data: {path: /d}\nmodel: {preset: dbrx-small, moe_num_experts: 2}\n") ==
        "train.yaml:2: model.moe_top_k: 4 is more than moe_num_experts (2)");
  CHECK(ErrorOf("data: {path: /d}\nfsdp: {sharding_strategy: ZERO3}\n") ==
        "train.yaml:2: fsdp.sharding_strategy: must be FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD or "
        "NO_SHARD");
  CHECK(ErrorOf("data: {path: /d}\nfsdp: {activation_checkpointing_interval: 2}\n") ==
        "train.yaml:2: fsdp.activation_checkpointing_interval: needs "
        "fsdp.activation_checkpointing: true");
  CHECK(ErrorOf("data: {path: /d}\nfsdp: {activation_checkpointing: true, "
                "activation_checkpointing_interval: 0}\n") ==
        "train.yaml:2: fsdp.activation_checkpointing_interval: must be positive");
  CHECK(ErrorOf("data: {path: /d}\nfsdp: {activation_checkpointing: sometimes}\n")
            .find("fsdp.activation_checkpointing: ") != std::string::npos);
  CHECK(ErrorOf("data: {path: /d}\nloss_rollback: {on_nan: true}\n") ==
        "train.yaml:2: loss_rollback: needs a save_folder and a save_interval (a rollback goes "
        "back to a checkpoint)");
  CHECK(ErrorOf("data: {path: /d}\nsave_folder: /c\nloss_rollback: {on_nan: true}\n") ==
        "train.yaml:3: loss_rollback: needs a save_folder and a save_interval (a rollback goes "
        "back to a checkpoint)");
  CHECK(ErrorOf("data: {path: /d}\nsave_folder: /c\nloss_rollback: {spike_factor: 0.5}\n") ==
        "train.yaml:3: loss_rollback.spike_factor: must be above 1 (a multiple of the recent "
        "median loss), or 0 for none");
  CHECK(ErrorOf("data: {path: /d}\nsave_folder: /c\nloss_rollback: {nan: true}\n")
            .find("train.yaml:3: loss_rollback.nan: unknown field") == 0);
  CHECK(ErrorOf("data: {path: /d}\nsave_folder: /c\nloss_rollback: {on_nan: true, window: 0}\n") ==
        "train.yaml:3: loss_rollback.window: must be positive");
  CHECK(ErrorOf("data: {path: /d}\nsave_interval: 5ba\n") ==
        "train.yaml:2: save_interval: needs a save_folder");
  CHECK(ErrorOf("data: {path: /d}\nmemory_checkpoint_interval: 5ba\n") ==
        "train.yaml:2: memory_checkpoint_interval: needs a save_folder (a snapshot recovered "
        "from memory is committed there)");
  CHECK(ErrorOf("data: {path: /d}\noptimizer: {betas: [0.9]}\n")
            .find("optimizer.betas: must be two numbers") != std::string::npos);
  CHECK(ErrorOf("data: [1, 2\n").find("train.yaml:") == 0);
  CHECK(ErrorOf("").find("the configuration is empty") != std::string::npos);
}

TEST_CASE("the model shape hash changes with the shape only") {
  ModelConfig a;
  REQUIRE(ApplyModelPreset(a).ok());
  a.vocab_size = 1000;
  ModelConfig b = a;
  b.dropout = 0.1;
  b.max_seq_len = 4096;
  CHECK(a.ShapeHash() == b.ShapeHash());
  b.n_layers = 3;
  CHECK(a.ShapeHash() != b.ShapeHash());
}

TEST_CASE("warmup then cosine to alpha_f") {
  OptimizerConfig o;
  o.lr = 1.0;
  SchedulerConfig s{10, 0.1};
  CHECK(LearningRate(o, s, 0, 110) == Approx(0.1));
  CHECK(LearningRate(o, s, 9, 110) == Approx(1.0));
  CHECK(LearningRate(o, s, 10, 110) == Approx(1.0));
  CHECK(LearningRate(o, s, 60, 110) == Approx(0.55));
  CHECK(LearningRate(o, s, 110, 110) == Approx(0.1));
  CHECK(LearningRate(o, SchedulerConfig{0, 0.0}, 50, 100) == Approx(0.5));
}

TEST_CASE("FLOPs per token and MFU follow the model's shape") {
  ModelConfig m;
  m.d_model = 768;
  m.n_layers = 12;
  m.vocab_size = 50368;
  m.mlp_ratio = 4;
  // 12 * (4 + 8) * 768^2 = 84.9M matrix parameters + 38.7M output projection.
  const double flops = TrainingFlopsPerToken(m, 2048);
  CHECK(flops == Approx(6 * (12 * 12 * 768.0 * 768 + 768.0 * 50368) + 12 * 12 * 768.0 * 2048));
  CHECK(Mfu(flops, 1e5, 312e12, 8) == Approx(flops * 1e5 / (312e12 * 8)));
  // A mixture of experts counts what a token passes through: its top k experts and the router.
  m.moe_num_experts = 16;
  m.moe_top_k = 4;
  CHECK(TrainingFlopsPerToken(m, 2048) ==
        Approx(6 * (12 * (4 * 768.0 * 768 + 4 * 8 * 768.0 * 768 + 768.0 * 16) + 768.0 * 50368) +
               12 * 12 * 768.0 * 2048));
  CHECK(*GpuPeakFlops("NVIDIA H100 80GB HBM3") == 989e12);
  CHECK(*GpuPeakFlops("NVIDIA A100-SXM4-80GB") == 312e12);
  CHECK(*GpuPeakFlops("NVIDIA A10G") == 125e12);
  CHECK(*GpuPeakFlops("NVIDIA L4") == 121e12);
  CHECK_FALSE(GpuPeakFlops("Some Future GPU").has_value());
}

TEST_CASE("progress records round-trip with full precision") {
  progress::ProgressRecord r;
  r.step = 37;
  r.total_steps = 60;
  r.loss = 5.123456789012345;
  r.learning_rate = 3e-4;
  r.tokens_per_second = 12345.5;
  r.mfu = 0.125;
  r.resumed_from_step = 30;
  r.time = 1700000000.25;
  auto back = progress::ProgressFromJsonLine(progress::ProgressToJsonLine(r));
  REQUIRE(back.ok());
  CHECK(back->loss == r.loss);  // bit-for-bit: the determinism test compares these
  CHECK(back->step == 37);
  CHECK(back->resumed_from_step == 30);
  CHECK_FALSE(progress::ProgressFromJsonLine("step 3").ok());
  CHECK(back->loss_rollbacks == 0);
  CHECK(back->last_rollback.number == 0);
  CHECK_FALSE(back->ready);
  CHECK(progress::ProgressToJsonLine(r).find("ready") == std::string::npos);
  r.ready = true;
  auto ready = progress::ProgressFromJsonLine(progress::ProgressToJsonLine(r));
  REQUIRE(ready.ok());
  CHECK(ready->ready);
}

TEST_CASE("a progress record carries the run's loss rollbacks and checkpoint costs") {
  progress::ProgressRecord r;
  r.step = 21;
  r.loss_rollbacks = 2;
  r.checkpoint_interval_steps = 25;
  r.checkpoint_save_seconds = 0.125;
  r.checkpoint_step = 20;
  r.last_rollback = {
      .number = 2, .max = 3, .bad_step = 25, .checkpoint_step = 20, .reason = "the loss is nan"};
  const std::string line = progress::ProgressToJsonLine(r);
  CHECK(line.find("\"last_rollback\"") != std::string::npos);
  auto back = progress::ProgressFromJsonLine(line);
  REQUIRE(back.ok());
  CHECK(back->loss_rollbacks == 2);
  CHECK(back->last_rollback.number == 2);
  CHECK(back->last_rollback.max == 3);
  CHECK(back->last_rollback.bad_step == 25);
  CHECK(back->last_rollback.checkpoint_step == 20);
  CHECK(back->last_rollback.reason == "the loss is nan");
  CHECK(back->checkpoint_interval_steps == 25);
  CHECK(back->checkpoint_save_seconds == 0.125);
  CHECK(back->checkpoint_step == 20);
  // Without a rollback, the record does not mention one.
  CHECK(progress::ProgressToJsonLine(progress::ProgressRecord{}).find("rollback") ==
        std::string::npos);
}

TEST_CASE("a progress line of the wrong types is an error, never an exception") {
  // A rank writes these files: the worker that reads them must not throw on what it finds.
  for (const std::string line :
       {R"({"step": 3, "loss": "high"})", R"({"step": 3, "total_steps": 1.5e300})",
        R"({"step": 3, "total_steps": -1e30})", R"({"step": 3, "loss": null})",
        R"({"step": 3, "last_rollback": 7})", R"({"step": 3, "last_rollback": {"number": "one"}})",
        R"({"step": 3, "last_rollback": {"reason": ["a"]}})",
        R"({"step": 3, "loss_rollbacks": 99999999999})", R"({"step": 3, "ready": 1})"}) {
    INFO(line);
    auto r = progress::ProgressFromJsonLine(line);
    CHECK_FALSE(r.ok());
    CHECK(r.status().message().find("progress record") != std::string::npos);
  }
}

TEST_CASE("the rank's place in the job comes from the worker's variables") {
  auto c = RankContextFromEnv({{"RANK", "3"},
                               {"WORLD_SIZE", "4"},
                               {"LOCAL_RANK", "1"},
                               {"LOCAL_WORLD_SIZE", "2"},
                               {"MASTER_ADDR", "10.0.0.1"},
                               {"MASTER_PORT", "29400"},
                               {"PARAMETERS", "/p.json"},
                               {"TESSERA_MEMORY_CHECKPOINT_DIR", "/dev/shm/m/run-1"},
                               {"TESSERA_MEMORY_CHECKPOINT_BYTES", "1048576"}});
  REQUIRE(c.ok());
  CHECK(c->rank == 3);
  CHECK(c->memory_checkpoint_dir == "/dev/shm/m/run-1");
  CHECK(c->memory_checkpoint_bytes == 1048576);
  CHECK(c->master_addr == "10.0.0.1");
  CHECK(c->parameters_path == "/p.json");
  auto solo = RankContextFromEnv({});
  REQUIRE(solo.ok());
  CHECK(solo->world_size == 1);
  CHECK(RankContextFromEnv({{"RANK", "4"}, {"WORLD_SIZE", "4"}}).status().message() ==
        "RANK=4 is not below WORLD_SIZE=4");
  CHECK(RankContextFromEnv({{"WORLD_SIZE", "zero"}}).status().message() ==
        "WORLD_SIZE=zero: must be an integer of at least 1");
  CHECK(RankContextFromEnv({{"TESSERA_MEMORY_CHECKPOINT_BYTES", "4GiB"}}).status().message() ==
        "TESSERA_MEMORY_CHECKPOINT_BYTES=4GiB: a number of bytes, please");
}

}  // namespace train_config_test
}  // namespace tessera::engine
