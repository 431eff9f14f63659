#include "worker/engine/model/gpt.h"

#include <torch/version.h>

#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "worker/engine/model/block_checkpoint.h"

namespace tessera::engine {
namespace {

// at::linear, not torch::nn::Linear::forward: LibTorch's C++ functional linear does matmul and
// then adds the bias for 3-D inputs, where at::linear uses one fused addmm (as Python's nn.Linear
// does); its backward is about a third slower.
torch::Tensor Linear(const torch::Tensor& x, const torch::nn::Linear& layer) {
  return torch::linear(x, layer->weight, layer->bias);
}

}  // namespace

std::vector<double> AlibiSlopes(int64_t n_heads) {
  auto power_of_two_slopes = [](int64_t n) {
    std::vector<double> s;
    const double start = std::pow(2.0, -8.0 / static_cast<double>(n));
    for (int64_t i = 0; i < n; ++i) s.push_back(std::pow(start, static_cast<double>(i + 1)));
    return s;
  };
  const int64_t closest = int64_t{1} << static_cast<int>(std::floor(std::log2(n_heads)));
  std::vector<double> slopes = power_of_two_slopes(closest);
  if (closest < n_heads) {
    const std::vector<double> extra = power_of_two_slopes(2 * closest);
    for (size_t i = 0; i < extra.size() && static_cast<int64_t>(slopes.size()) < n_heads; i += 2) {
      slopes.push_back(extra[i]);
    }
  }
  return slopes;
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& c)
    : n_heads_(c.n_heads), head_dim_(c.d_model / c.n_heads), dropout_(c.dropout) {
  qkv_ = register_module("qkv", torch::nn::Linear(c.d_model, 3 * c.d_model));
  proj_ = register_module("proj", torch::nn::Linear(c.d_model, c.d_model));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const AttentionBias& bias) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  // unbind, not three selects: its backward is one stack instead of three full-size scatters.
  auto qkv =
      Linear(x, qkv_).view({b, t, 3, n_heads_, head_dim_}).permute({2, 0, 3, 1, 4}).unbind(0);
  const auto &q = qkv[0], &k = qkv[1], &v = qkv[2];  // [B, H, T, Dh]
#if TORCH_VERSION_MAJOR >= 2
  // LibTorch 2's fused attention on a GPU (the memory-efficient kernel: FlashAttention takes no
  // bias). ALiBi and the causal mask go in as one additive mask, so it is exact ALiBi.
  if (fused_attention_ && x.is_cuda() && bias.combined.defined()) {
    auto y = at::scaled_dot_product_attention(q, k, v, bias.combined.to(q.scalar_type()),
                                              is_training() ? dropout_ : 0.0, /*is_causal=*/false,
                                              1.0 / std::sqrt(double(head_dim_)));
    return Linear(y.transpose(1, 2).reshape({b, t, d}), proj_);
  }
#endif
  // The scale goes on q (T times smaller than the scores); the bias and the mask are applied in
  // place (the product's backward needs its inputs, not its output): two passes over the
  // [B, H, T, T] scores fewer, forward and backward.
  auto scores = torch::matmul(q * (1.0 / std::sqrt(double(head_dim_))), k.transpose(-2, -1));
  if (bias.combined.defined()) {
    scores.add_(bias.combined);
  } else {
    scores.add_(bias.alibi).masked_fill_(bias.causal_mask, -std::numeric_limits<float>::infinity());
  }
  auto attn = torch::softmax(scores, -1);
  if (dropout_ > 0 && is_training()) attn = torch::dropout(attn, dropout_, true);
  auto y = torch::matmul(attn, v).transpose(1, 2).reshape({b, t, d});
  return Linear(y, proj_);
}

GptBlockImpl::GptBlockImpl(const ModelConfig& c) : dropout_(c.dropout) {
  const int64_t hidden = static_cast<int64_t>(c.mlp_ratio * static_cast<double>(c.d_model));
  ln_1_ = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  attn_ = register_module("attn", CausalSelfAttention(c));
  ln_2_ = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  if (c.is_moe()) {
    moe_ =
        register_module("moe", MoeFeedForward(c.d_model, hidden, c.moe_num_experts, c.moe_top_k));
  } else {
    fc_ = register_module("fc", torch::nn::Linear(c.d_model, hidden));
    fc_proj_ = register_module("fc_proj", torch::nn::Linear(hidden, c.d_model));
  }
}

torch::Tensor GptBlockImpl::forward(const torch::Tensor& x, const AttentionBias& bias,
                                    double load_balancing_scale) {
  auto h = x + attn_->forward(ln_1_->forward(x), bias);
  torch::Tensor m;
  if (moe_) {
    MoeOutput out = moe_->forward(ln_2_->forward(h));
    load_balancing_loss_ = out.load_balancing_loss.detach();
    tokens_per_expert_ = out.tokens_per_expert;
    m = out.y;
    if (load_balancing_scale != 0 && out.load_balancing_loss.requires_grad()) {
      m = WithAuxiliaryLoss(m, out.load_balancing_loss, load_balancing_scale);
    }
  } else {
    m = Linear(torch::gelu(Linear(ln_2_->forward(h), fc_)), fc_proj_);
  }
  if (dropout_ > 0 && is_training()) m = torch::dropout(m, dropout_, true);
  return h + m;
}

GptImpl::GptImpl(const ModelConfig& c) : config_(c) {
  wte_ = register_module("wte", torch::nn::Embedding(c.vocab_size, c.d_model));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layers; ++i) blocks_->push_back(GptBlock(c));
  ln_f_ = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  const auto slopes = AlibiSlopes(c.n_heads);
  slopes_ = register_buffer(
      "alibi_slopes",
      torch::tensor(std::vector<float>(slopes.begin(), slopes.end())).view({c.n_heads, 1, 1}));

  // GPT-2's initialization: N(0, init_std), residual projections scaled by 1/sqrt(2 * layers).
  torch::NoGradGuard no_grad;
  const double residual_std = c.init_std / std::sqrt(2.0 * static_cast<double>(c.n_layers));
  for (auto& named : named_parameters()) {
    const std::string& name = named.key();
    auto& p = named.value();
    if (p.dim() == 1 || absl::EndsWith(name, "_bias")) {  // "_bias": an MoE's experts
      if (name.find("ln_") != std::string::npos && name.find(".weight") != std::string::npos) {
        p.fill_(1.0);
      } else {
        p.zero_();
      }
    } else if (absl::EndsWith(name, "proj.weight") || absl::EndsWith(name, "proj_weight")) {
      p.normal_(0.0, residual_std);
    } else {
      p.normal_(0.0, c.init_std);
    }
  }
}

AttentionBias GptImpl::BiasFor(int64_t t, const torch::Device& device) {
  if (cached_bias_.alibi.defined() && cached_bias_.alibi.size(2) == t &&
      cached_bias_.alibi.device() == device) {
    return cached_bias_;
  }
  torch::NoGradGuard no_grad;
  auto positions = torch::arange(t, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  AttentionBias bias;
  bias.alibi = slopes_.to(device) * positions.view({1, 1, t});
  bias.causal_mask =
      torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(device)).triu(1);
  constexpr int64_t kMaxCombinedElements = int64_t{16} << 20;  // 64 MiB of fp32
  if (config_.n_heads * t * t <= kMaxCombinedElements) {
    bias.combined = bias.alibi.expand({config_.n_heads, t, t})
                        .masked_fill(bias.causal_mask, -std::numeric_limits<float>::infinity())
                        .contiguous();
  }
  cached_bias_ = bias;
  return bias;
}

torch::Tensor GptImpl::forward(const torch::Tensor& tokens) {
  auto x = wte_->forward(tokens);
  if (config_.dropout > 0 && is_training()) x = torch::dropout(x, config_.dropout, true);
  const AttentionBias bias = BiasFor(tokens.size(1), tokens.device());
  const bool checkpointing =
      checkpoint_every_ > 0 && is_training() && torch::GradMode::is_enabled();
  // Autograd comes back through the blocks only when the step's loss depends on them.
  const bool backward_follows = torch::GradMode::is_enabled() && x.requires_grad();
  BlockParameterHooks* hooks = hooks_;
  // Each block's share of the mean over blocks; only while training with autograd.
  const double load_balancing_scale =
      backward_follows ? load_balancing_scale_ / static_cast<double>(blocks_->size()) : 0.0;
  for (size_t i = 0; i < blocks_->size(); ++i) {
    const auto index = static_cast<int64_t>(i);
    GptBlockImpl* block = blocks_[i]->as<GptBlock>();
    if (hooks != nullptr) {
      hooks->BeforeForward(index);
      // Hooks on a tensor run, in the order registered, once its gradient is complete: for the
      // block's input, once the block's backward is done; for the previous block's output
      // (the same tensor), before that block's backward. This block's end comes first, so
      // that it is freed before the one before the previous is fetched.
      if (backward_follows) {
        x.register_hook([hooks, index](const torch::Tensor&) { hooks->AfterBackward(index); });
        if (index > 0) {
          x.register_hook(
              [hooks, index](const torch::Tensor&) { hooks->BeforeBackward(index - 1); });
        }
      }
    }
    if (checkpointing && index % checkpoint_every_ == 0) {
      x = CheckpointedForward(
          [block, bias, load_balancing_scale](const torch::Tensor& in) {
            return block->forward(in, bias, load_balancing_scale);
          },
          x);
    } else {
      x = block->forward(x, bias, load_balancing_scale);
    }
    if (hooks != nullptr) hooks->AfterForward(index, backward_follows);
  }
  if (hooks != nullptr && backward_follows && !blocks_->is_empty()) {
    const int64_t last = block_count() - 1;
    x.register_hook([hooks, last](const torch::Tensor&) { hooks->BeforeBackward(last); });
  }
  x = ln_f_->forward(x);
  return torch::matmul(x, wte_->weight.t());
}

std::vector<ParameterUnit> GptImpl::ParameterUnits() {
  std::vector<ParameterUnit> units;
  ParameterUnit rest{"embedding and final norm", -1, {}};
  rest.parameters = wte_->parameters();
  for (const auto& p : ln_f_->parameters()) rest.parameters.push_back(p);
  units.push_back(std::move(rest));
  for (size_t i = 0; i < blocks_->size(); ++i) {
    units.push_back(ParameterUnit{"block " + std::to_string(i), static_cast<int64_t>(i),
                                  blocks_[i]->parameters()});
  }
  return units;
}

torch::Tensor GptImpl::LoadBalancingLoss() {
  torch::Tensor sum;
  for (size_t i = 0; i < blocks_->size(); ++i) {
    const torch::Tensor& loss = blocks_[i]->as<GptBlock>()->load_balancing_loss();
    if (!loss.defined()) return {};
    sum = sum.defined() ? sum + loss : loss;
  }
  return sum.defined() ? sum / static_cast<double>(blocks_->size()) : sum;
}

torch::Tensor GptImpl::LossSum(const torch::Tensor& tokens, const torch::Tensor& labels) {
  auto logits = forward(tokens);
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32), labels.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

}  // namespace tessera::engine
