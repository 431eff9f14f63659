// Parameter sharding (parameter_sharding.h): FULL_SHARD gathers each block's parameters just
// before use and frees them after, and gives the gradients SHARD_GRAD_OP gives. Over one rank
// in this process, and over four ranks as threads that meet on loopback through Gloo, as
// tessera-train's ranks do across processes.
#include "worker/engine/train/parameter_sharding.h"

#include <thread>
#include <vector>

#include "worker/engine/common/cpu_allocation_meter.h"
#include "worker/engine/train/block_parameter_sharding.h"

// LibTorch brings glog, whose CHECK aborts instead of recording a failure: use Catch's.
#undef CHECK
#include <catch2/catch.hpp>

#include "tests/support/free_port.h"

namespace tessera::engine {
namespace parameter_sharding_test {

ModelConfig Small() {
  ModelConfig c;
  c.d_model = 32;
  c.n_heads = 4;
  c.n_layers = 4;
  c.max_seq_len = 16;
  c.vocab_size = 50;
  return c;
}

int64_t Numel(const std::vector<torch::Tensor>& parameters) {
  int64_t n = 0;
  for (const auto& p : parameters) n += p.numel();
  return n;
}

std::unique_ptr<ShardGroups> JoinAlone() {
  RankContext ctx;
  ctx.master_port = 1;  // a world of one reaches no one
  auto groups = ShardGroups::Join(TrainConfig{}, ctx, /*cuda=*/false);
  REQUIRE(groups.ok());
  return std::move(*groups);
}

struct OneRankStep {
  double loss = 0;
  torch::Tensor grads;
  int64_t held_between = 0, peak_held = 0;
  int64_t live_before = 0, live_after = 0;  // CPU tensor bytes around the step
};

// Two training steps' forward and backward (two microbatches each) of a fresh model (seed 21)
// under `sharding` on one rank: the second step's loss and gradient shard.
OneRankStep StepAlone(Sharding sharding, const ModelConfig& config, int64_t checkpoint_every,
                      const torch::Tensor& tokens) {
  auto& meter = CpuAllocationMeter::Install();
  auto groups = JoinAlone();
  torch::manual_seed(21);
  Gpt model(config);
  model->train();
  model->SetActivationCheckpointing(checkpoint_every);
  model->SetLoadBalancingScale(0.05);  // an MoE's: its gradient joins the block's backward
  // The factory gives a group of one SHARD_GRAD_OP's sharding: made here, FULL_SHARD's is tested.
  std::unique_ptr<ParameterSharding> parameters;
  if (sharding == Sharding::kFullShard) {
    parameters =
        std::make_unique<BlockParameterSharding>(model, *groups, Numel(model->parameters()));
  } else {
    parameters = MakeParameterSharding(sharding, model, *groups);
  }
  OneRankStep out;
  const int64_t t = tokens.size(1) - 1;
  for (int step = 0; step < 2; ++step) {
    out.live_before = meter.live_bytes();
    parameters->BeginStep();
    torch::manual_seed(22 + step);  // dropout's draws
    double loss = 0;
    for (int64_t m = 0; m < 2; ++m) {
      auto rows = tokens.narrow(0, m * 2, 2);
      auto l = model->LossSum(rows.narrow(1, 0, t), rows.narrow(1, 1, t));
      l.backward();
      parameters->MicrobatchDone();
      loss += l.item<double>();
    }
    const torch::Tensor grads = parameters->ReduceGradients();  // a view: nothing allocated
    out.live_after = meter.live_bytes();
    out.grads = grads.clone();
    out.loss = loss;
    out.held_between = parameters->held_bytes();
    parameters->ShardUpdated();
  }
  out.peak_held = parameters->peak_held_bytes();
  return out;
}

TEST_CASE(
    "FULL_SHARD's block gathers on one rank give SHARD_GRAD_OP's gradients bit for bit, and "
    "free every block they gathered, dense or mixture of experts") {
  ModelConfig config = Small();
  config.dropout = 0.1;
  torch::manual_seed(5);
  const auto tokens = torch::randint(0, 50, {4, 13});
  for (int64_t combination = 0; combination < 6; ++combination) {
    const int64_t checkpoint_every = combination % 3;
    config.moe_num_experts = combination < 3 ? 0 : 4;
    config.moe_top_k = combination < 3 ? 0 : 2;
    INFO(config.moe_num_experts << " experts, activation checkpointing every " << checkpoint_every
                                << " blocks");
    const OneRankStep gathered =
        StepAlone(Sharding::kShardGradOp, config, checkpoint_every, tokens);
    const OneRankStep blocks = StepAlone(Sharding::kFullShard, config, checkpoint_every, tokens);
    CHECK(blocks.loss == gathered.loss);
    CHECK(torch::equal(blocks.grads, gathered.grads));
    CHECK(blocks.grads.abs().sum().item<double>() > 0);
    // What the step gathered (embedding, blocks, their gradients) is all freed at its end.
    CHECK(blocks.live_after == blocks.live_before);
    // One rank's shard is the whole model; during a step it held at most the embedding and
    // final norm and two blocks (the one computing and the next one's gather) besides.
    torch::manual_seed(21);
    Gpt model(config);
    const auto units = model->ParameterUnits();
    const int64_t model_bytes = Numel(model->parameters()) * 4;
    const int64_t rest = Numel(units[0].parameters) * 4, block = Numel(units[1].parameters) * 4;
    CHECK(blocks.held_between == model_bytes);
    CHECK(blocks.peak_held == model_bytes + rest + 2 * block);
    CHECK(gathered.peak_held == model_bytes);
  }
}

TEST_CASE(
    "FULL_SHARD and HYBRID_SHARD over a shard group of one keep the gathered parameters: "
    "there is no one to shard with") {
  auto groups = JoinAlone();
  for (Sharding sharding : {Sharding::kFullShard, Sharding::kHybridShard}) {
    INFO(ShardingName(sharding));
    torch::manual_seed(21);
    Gpt model(Small());
    const int64_t model_bytes = Numel(model->parameters()) * 4;
    auto parameters = MakeParameterSharding(sharding, model, *groups);
    parameters->BeginStep();
    const auto tokens = torch::randint(0, 50, {1, 13});
    model->LossSum(tokens.narrow(1, 0, 12), tokens.narrow(1, 1, 12)).backward();
    parameters->MicrobatchDone();
    parameters->ReduceGradients();
    CHECK(parameters->held_bytes() == model_bytes);
    CHECK(parameters->peak_held_bytes() == model_bytes);
  }
}

struct RankResult {
  torch::Tensor grad_shard;
  int64_t shard_begin = 0, shard_count = 0, held_between = 0, peak_held = 0;
};

// One step of `world` ranks as threads under `config`'s sharding; rank r trains on row r of
// `tokens`. Models are built here first: the generator is the process's.
std::vector<RankResult> StepTogether(const TrainConfig& config, int world,
                                     const torch::Tensor& tokens) {
  std::vector<Gpt> models;
  for (int r = 0; r < world; ++r) {
    torch::manual_seed(31);
    models.emplace_back(config.model);
  }
  const int port = testing::FreePort();
  std::vector<RankResult> out(static_cast<size_t>(world));
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> ranks;
  const int64_t t = tokens.size(1) - 1;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      RankContext ctx;
      ctx.rank = r;
      ctx.world_size = world;
      ctx.local_world_size = 2;
      ctx.master_port = port;
      auto groups = ShardGroups::Join(config, ctx, /*cuda=*/false);
      if (!groups.ok()) {
        errors[static_cast<size_t>(r)] = groups.status().ToString();
        return;
      }
      Gpt& model = models[static_cast<size_t>(r)];
      auto parameters = MakeParameterSharding(config.sharding, model, **groups);
      parameters->BeginStep();
      auto row = tokens.narrow(0, r, 1);
      model->LossSum(row.narrow(1, 0, t), row.narrow(1, 1, t)).backward();
      parameters->MicrobatchDone();
      RankResult& mine = out[static_cast<size_t>(r)];
      mine.grad_shard = parameters->ReduceGradients().clone();
      mine.shard_begin = parameters->shard_begin();
      mine.shard_count = parameters->shard_count();
      mine.held_between = parameters->held_bytes();
      mine.peak_held = parameters->peak_held_bytes();
      parameters.reset();
      (*groups)->world().Barrier();  // rank 0 serves the store: it leaves last
    });
  }
  for (auto& thread : ranks) thread.join();
  for (const auto& e : errors) REQUIRE(e.empty());
  return out;
}

TEST_CASE(
    "FULL_SHARD over 4 ranks: each holds a quarter of the parameters between steps, and "
    "the shards of the gradients are the whole batch's, and HYBRID_SHARD holds a half") {
  TrainConfig config;
  config.model = Small();
  torch::manual_seed(6);
  const auto tokens = torch::randint(0, 50, {4, 13});
  // The reference: one model, the whole batch.
  torch::manual_seed(31);
  Gpt reference(config.model);
  reference->LossSum(tokens.narrow(1, 0, 12), tokens.narrow(1, 1, 12)).backward();
  std::vector<torch::Tensor> flat;
  for (const auto& p : reference->parameters()) flat.push_back(p.grad().reshape({-1}));
  const torch::Tensor want = torch::cat(flat);
  const int64_t numel = want.numel();
  const auto units = reference->ParameterUnits();
  const int64_t rest = Numel(units[0].parameters) * 4, block = Numel(units[1].parameters) * 4;

  for (Sharding sharding : {Sharding::kFullShard, Sharding::kHybridShard}) {
    config.sharding = sharding;  // hybrid: groups of LOCAL_WORLD_SIZE (2)
    const int64_t shards = sharding == Sharding::kFullShard ? 4 : 2;
    INFO(ShardingName(sharding));
    const auto ranks = StepTogether(config, 4, tokens);
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r);
      const RankResult& mine = ranks[static_cast<size_t>(r)];
      const int64_t shard_bytes = (numel + shards - 1) / shards * 4;
      CHECK(mine.held_between == shard_bytes);
      CHECK(mine.peak_held == shard_bytes + rest + 2 * block);
      CHECK(mine.shard_begin == (r % shards) * ((numel + shards - 1) / shards));
      const auto got = mine.grad_shard.narrow(0, 0, mine.shard_count);
      const auto expected = want.narrow(0, mine.shard_begin, mine.shard_count);
      // Summed in another order than the whole batch's: equal to float error.
      INFO("largest difference " << (got - expected).abs().max().item<float>());
      CHECK(torch::allclose(got, expected, /*rtol=*/1e-4, /*atol=*/1e-5));
    }
  }
}

}  // namespace parameter_sharding_test
}  // namespace tessera::engine
