// The engine's LibTorch parts: the flat parameter buffer, the sharded AdamW against
// torch::optim::AdamW, ALiBi, the causal GPT and its activation checkpointing.
#include "worker/engine/common/cpu_allocation_meter.h"
#include "worker/engine/model/gpt.h"
#include "worker/engine/train/flat_parameters.h"
#include "worker/engine/train/sharded_adamw.h"

// LibTorch brings glog, whose CHECK aborts instead of recording a failure: use Catch's.
#undef CHECK
#include <catch2/catch.hpp>

namespace tessera::engine {
namespace engine_torch_test {

ModelConfig Tiny() {
  ModelConfig c;
  c.d_model = 32;
  c.n_heads = 4;
  c.n_layers = 2;
  c.max_seq_len = 16;
  c.vocab_size = 50;
  return c;
}

TEST_CASE("parameters and gradients live in one flat buffer, padded for the shards") {
  torch::manual_seed(1);
  Gpt model(Tiny());
  int64_t numel = 0;
  for (const auto& p : model->parameters()) numel += p.numel();
  FlatParameters flat(*model, 3);
  CHECK(flat.numel() == numel);
  CHECK(flat.padded_numel() % 3 == 0);
  CHECK(flat.padded_numel() - numel < 3);
  CHECK(flat.ShardBegin(2) + flat.ShardCount(2) == numel);
  // Writing the buffer changes the model; backward accumulates into the flat gradients.
  {
    torch::NoGradGuard no_grad;
    flat.params().narrow(0, 0, 50 * 32).fill_(0.0);
  }
  CHECK(model->named_parameters()["wte.weight"].abs().sum().item<double>() == 0.0);
  flat.params().narrow(0, 0, 50 * 32).normal_(0, 0.02);
  auto tokens = torch::randint(0, 50, {2, 8});
  model->LossSum(tokens, tokens).backward();
  const double flat_grad_norm = flat.grads().norm().item<double>();
  double module_grad_sq = 0;
  for (const auto& p : model->parameters()) module_grad_sq += p.grad().pow(2).sum().item<double>();
  CHECK(flat_grad_norm > 0);
  CHECK(flat_grad_norm == Approx(std::sqrt(module_grad_sq)));
  // Biases and norms are not decayed; matrices and the embedding are.
  CHECK(flat.decay_mask().sum().item<double>() > 0);
  CHECK(flat.decay_mask().sum().item<double>() < numel);
}

TEST_CASE("sharded AdamW over two shards matches torch::optim::AdamW on the whole") {
  torch::manual_seed(3);
  auto reference = torch::randn({10}).set_requires_grad(true);
  auto flat = reference.detach().clone();
  OptimizerConfig o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  torch::optim::AdamW torch_adamw({reference}, torch::optim::AdamWOptions(o.lr)
                                                   .betas({o.beta1, o.beta2})
                                                   .eps(o.eps)
                                                   .weight_decay(o.weight_decay));
  auto mask = torch::ones({10});
  ShardedAdamW low(o, flat.narrow(0, 0, 5), mask.narrow(0, 0, 5));
  ShardedAdamW high(o, flat.narrow(0, 5, 5), mask.narrow(0, 5, 5));
  for (int step = 1; step <= 5; ++step) {
    auto grad = torch::randn({10});
    reference.mutable_grad() = grad.clone();
    torch_adamw.step();
    low.Step(grad.narrow(0, 0, 5), o.lr, step);
    high.Step(grad.narrow(0, 5, 5), o.lr, step);
  }
  CHECK(torch::allclose(flat, reference.detach(), 1e-6, 1e-7));
}

TEST_CASE("ALiBi slopes follow the paper for powers of two and interleave otherwise") {
  const auto s8 = AlibiSlopes(8);
  REQUIRE(s8.size() == 8);
  CHECK(s8[0] == Approx(0.5));
  CHECK(s8[7] == Approx(1.0 / 256));
  const auto s6 = AlibiSlopes(6);
  REQUIRE(s6.size() == 6);
  CHECK(s6[0] == Approx(0.0625 * 4));           // the 4-head sequence: 1/4, 1/16, ...
  CHECK(s6[4] == Approx(std::pow(2.0, -1.0)));  // then every other of the 8-head sequence
}

TEST_CASE("the GPT is causal: a later token never changes an earlier prediction") {
  torch::manual_seed(5);
  Gpt model(Tiny());
  model->eval();
  torch::NoGradGuard no_grad;
  auto a = torch::randint(0, 50, {1, 12});
  auto b = a.clone();
  b[0][9] = (b[0][9].item<int64_t>() + 1) % 50;
  auto la = model->forward(a), lb = model->forward(b);
  CHECK(la.sizes() == torch::IntArrayRef({1, 12, 50}));
  CHECK(torch::equal(la.narrow(1, 0, 9), lb.narrow(1, 0, 9)));
  CHECK_FALSE(torch::equal(la.narrow(1, 9, 1), lb.narrow(1, 9, 1)));
  // An untrained model predicts about uniformly: loss near ln(vocab).
  const double loss = model->LossSum(a.narrow(1, 0, 11), a.narrow(1, 1, 11)).item<double>() / 11;
  CHECK(loss == Approx(std::log(50.0)).epsilon(0.1));
}

// One training forward and backward of a fresh model (seed 11) on fixed tokens, checkpointing
// every k-th block (0: none): the loss and every parameter's gradient, flattened.
struct Pass {
  double loss = 0;
  torch::Tensor grads;
  int64_t peak_bytes = 0;  // CPU tensor memory at most during forward and backward, over before
};

Pass TrainingPass(const ModelConfig& config, int64_t checkpoint_every,
                  const torch::Tensor& tokens) {
  torch::manual_seed(11);
  Gpt model(config);
  model->train();
  model->SetActivationCheckpointing(checkpoint_every);
  model->SetLoadBalancingScale(0.05);  // an MoE's router learns from its balance too
  const int64_t t = tokens.size(1) - 1;
  auto& meter = CpuAllocationMeter::Install();
  const int64_t before = meter.live_bytes();
  meter.ResetPeak();
  torch::manual_seed(12);  // dropout's draws
  auto loss = model->LossSum(tokens.narrow(1, 0, t), tokens.narrow(1, 1, t));
  loss.backward();
  Pass pass;
  pass.peak_bytes = meter.peak_bytes() - before;
  pass.loss = loss.item<double>();
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters()) grads.push_back(p.grad().reshape({-1}));
  pass.grads = torch::cat(grads);
  return pass;
}

TEST_CASE(
    "activation checkpointing changes no loss and no gradient, bit for bit, dense or mixture of "
    "experts") {
  ModelConfig config = Tiny();
  config.n_layers = 4;
  config.dropout = 0.1;  // the recomputation must draw the same masks
  torch::manual_seed(3);
  const auto tokens = torch::randint(0, 50, {2, 16});
  for (const int64_t experts : {0, 4}) {
    config.moe_num_experts = experts;
    config.moe_top_k = experts > 0 ? 2 : 0;
    const Pass plain = TrainingPass(config, 0, tokens);
    REQUIRE(plain.grads.abs().sum().item<double>() > 0);
    for (int64_t every : {1, 2, 3}) {
      INFO(experts << " experts, checkpointing every " << every << " blocks");
      const Pass checkpointed = TrainingPass(config, every, tokens);
      CHECK(checkpointed.loss == plain.loss);
      CHECK(torch::equal(checkpointed.grads, plain.grads));
    }
  }
  config.moe_num_experts = config.moe_top_k = 0;
  // And the draws after a step are what they would have been: the next step's masks too.
  torch::manual_seed(12);
  const double next_plain = torch::rand({1}).item<double>();
  TrainingPass(config, 1, tokens);
  const double after_checkpointed = torch::rand({1}).item<double>();
  TrainingPass(config, 0, tokens);
  CHECK(after_checkpointed == torch::rand({1}).item<double>());
  CHECK(next_plain != after_checkpointed);  // the pass drew: the check above compares draws
}

TEST_CASE("activation checkpointing keeps a block's input, not its activations") {
  // Activations dominate: a long sequence on a small model.
  ModelConfig config = Tiny();
  config.n_layers = 6;
  config.max_seq_len = 256;
  torch::manual_seed(4);
  const auto tokens = torch::randint(0, 50, {4, 257});
  const Pass plain = TrainingPass(config, 0, tokens);
  const Pass every = TrainingPass(config, 1, tokens);
  const Pass second = TrainingPass(config, 2, tokens);
  INFO("peak bytes: none " << plain.peak_bytes << ", every block " << every.peak_bytes
                           << ", every second " << second.peak_bytes);
  CHECK(every.loss == plain.loss);
  // Kept: six blocks' activations (each with its attention scores [B, H, T, T], 4 MiB here)
  // against six blocks' inputs ([B, T, d], 128 KiB) and one block's activations at a time.
  CHECK(every.peak_bytes < plain.peak_bytes / 2);
  CHECK(every.peak_bytes < second.peak_bytes);
  CHECK(second.peak_bytes < plain.peak_bytes);
}

}  // namespace engine_torch_test
}  // namespace tessera::engine
