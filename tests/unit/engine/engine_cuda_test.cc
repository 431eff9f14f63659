// The engine's CUDA paths: bf16 autocast over fp32 master weights, LibTorch 2's fused attention
// with the ALiBi bias, per-block parameter sharding and the mixture of experts on a GPU. Built
// wherever CUDA is installed, so that it compiles in CI; run by tests/gpu/engine_gpu_check.sh on a
// machine with a GPU (never by CTest: tests need no GPU).
#include <torch/torch.h>
#include <torch/version.h>

#include "worker/engine/model/cuda_autocast.h"
#include "worker/engine/model/gpt.h"
#include "worker/engine/train/block_parameter_sharding.h"
#include "worker/engine/train/parameter_sharding.h"
#include "worker/engine/train/shard_groups.h"

// LibTorch brings glog, whose CHECK aborts instead of recording a failure: use Catch's.
#undef CHECK
#include <catch2/catch.hpp>

namespace tessera::engine {
namespace engine_cuda_test {

ModelConfig Shape(int64_t experts = 0) {
  ModelConfig c;
  c.d_model = 128;
  c.n_heads = 4;
  c.n_layers = 3;
  c.max_seq_len = 128;
  c.vocab_size = 512;
  c.moe_num_experts = experts;
  c.moe_top_k = experts > 0 ? 2 : 0;
  return c;
}

const torch::Device kGpu(torch::kCUDA, 0);

torch::Tensor Tokens() {
  torch::manual_seed(7);
  return torch::randint(0, 512, {4, 129}).to(kGpu);
}

// The largest difference relative to the largest magnitude of `want`.
double Relative(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kFloat32) - want.to(torch::kFloat32)).abs().max().item<double>() /
         want.to(torch::kFloat32).abs().max().item<double>();
}

struct Pass {
  double loss = 0;
  torch::Tensor logits, grads;
  bool all_fp32 = true;
};

Pass Run(const ModelConfig& config, bool autocast, bool fused) {
  torch::manual_seed(11);
  Gpt model(config);
  model->to(kGpu);
  model->train();
  model->SetFusedAttention(fused);
  const auto tokens = Tokens();
  const int64_t t = tokens.size(1) - 1;
  SetCudaAutocast(autocast, at::kBFloat16);
  Pass pass;
  pass.logits = model->forward(tokens.narrow(1, 0, t)).detach();
  auto loss = model->LossSum(tokens.narrow(1, 0, t), tokens.narrow(1, 1, t)) /
              static_cast<double>(tokens.size(0) * t);
  loss.backward();
  SetCudaAutocast(false, at::kBFloat16);
  pass.loss = loss.item<double>();
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters()) {
    pass.all_fp32 = pass.all_fp32 && p.scalar_type() == torch::kFloat32 &&
                    p.grad().scalar_type() == torch::kFloat32;
    grads.push_back(p.grad().reshape({-1}));
  }
  pass.grads = torch::cat(grads);
  return pass;
}

TEST_CASE("a GPU is there") { REQUIRE(torch::cuda::is_available()); }

TEST_CASE(
    "bf16 autocast keeps fp32 master weights and gradients, and the loss within bf16's reach") {
  REQUIRE(torch::cuda::is_available());
  const Pass fp32 = Run(Shape(), false, false), bf16 = Run(Shape(), true, false);
  CHECK(bf16.all_fp32);
  CHECK(bf16.logits.scalar_type() == torch::kBFloat16);
  CHECK(std::abs(bf16.loss - fp32.loss) / fp32.loss < 1e-2);
  CHECK(Relative(bf16.grads, fp32.grads) < 5e-2);
}

TEST_CASE("fused attention with the ALiBi bias gives the explicit attention's results") {
  REQUIRE(torch::cuda::is_available());
  const Pass explicit_fp32 = Run(Shape(), false, false), fused_fp32 = Run(Shape(), false, true);
  CHECK(Relative(fused_fp32.logits, explicit_fp32.logits) < 1e-4);
  CHECK(Relative(fused_fp32.grads, explicit_fp32.grads) < 1e-3);
  const Pass explicit_bf16 = Run(Shape(), true, false), fused_bf16 = Run(Shape(), true, true);
  CHECK(Relative(fused_bf16.logits, explicit_bf16.logits) < 3e-2);
  INFO("LibTorch " << TORCH_VERSION);
#if TORCH_VERSION_MAJOR < 2
  FAIL("this LibTorch has no scaled-dot-product attention: the fused path is not built");
#endif
}

TEST_CASE("a mixture of experts on the GPU computes what it computes on the CPU") {
  REQUIRE(torch::cuda::is_available());
  torch::manual_seed(3);
  MoeFeedForward layer(64, 128, 8, 2);
  const auto x = torch::randn({2, 33, 64});
  const MoeOutput cpu = layer->forward(x);
  layer->to(kGpu);
  const MoeOutput gpu = layer->forward(x.to(kGpu));
  CHECK(torch::equal(gpu.tokens_per_expert.cpu(), cpu.tokens_per_expert));
  CHECK(Relative(gpu.y.cpu(), cpu.y) < 1e-4);
  CHECK(std::abs(gpu.load_balancing_loss.item<double>() - cpu.load_balancing_loss.item<double>()) <
        1e-5);
}

TEST_CASE("FULL_SHARD's per-block gathers on one GPU give SHARD_GRAD_OP's gradients") {
  REQUIRE(torch::cuda::is_available());
  RankContext ctx;
  ctx.master_port = 1;  // a world of one reaches no one
  auto groups = ShardGroups::Join(TrainConfig{}, ctx, /*cuda=*/true);
  REQUIRE(groups.ok());
  const auto tokens = Tokens();
  const int64_t t = tokens.size(1) - 1;
  torch::Tensor grads[2];
  for (int strategy = 0; strategy < 2; ++strategy) {
    torch::manual_seed(21);
    Gpt model(Shape(4));
    model->to(kGpu);
    model->train();
    model->SetLoadBalancingScale(0.05);
    int64_t numel = 0;
    for (const auto& p : model->parameters()) numel += p.numel();
    std::unique_ptr<ParameterSharding> sharding =
        strategy == 0 ? MakeParameterSharding(Sharding::kShardGradOp, model, **groups)
                      : std::make_unique<BlockParameterSharding>(model, **groups, numel);
    sharding->BeginStep();
    SetCudaAutocast(true, at::kBFloat16);
    model->LossSum(tokens.narrow(1, 0, t), tokens.narrow(1, 1, t)).backward();
    SetCudaAutocast(false, at::kBFloat16);
    sharding->MicrobatchDone();
    grads[strategy] = sharding->ReduceGradients().clone();
    CHECK(grads[strategy].abs().sum().item<double>() > 0);
  }
  CHECK(Relative(grads[1], grads[0]) < 1e-5);
}

}  // namespace engine_cuda_test
}  // namespace tessera::engine
