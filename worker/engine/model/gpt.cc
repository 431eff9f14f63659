#include "worker/engine/model/gpt.h"

#include <cmath>
#include <limits>

namespace tessera::engine {

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
  auto qkv = qkv_->forward(x).view({b, t, 3, n_heads_, head_dim_}).permute({2, 0, 3, 1, 4});
  auto q = qkv[0], k = qkv[1], v = qkv[2];  // [B, H, T, Dh]
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(head_dim_)));
  scores =
      (scores + bias.alibi).masked_fill(bias.causal_mask, -std::numeric_limits<float>::infinity());
  auto attn = torch::softmax(scores, -1);
  if (dropout_ > 0 && is_training()) attn = torch::dropout(attn, dropout_, true);
  auto y = torch::matmul(attn, v).transpose(1, 2).reshape({b, t, d});
  return proj_->forward(y);
}

GptBlockImpl::GptBlockImpl(const ModelConfig& c) : dropout_(c.dropout) {
  const int64_t hidden = static_cast<int64_t>(c.mlp_ratio * static_cast<double>(c.d_model));
  ln_1_ = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  attn_ = register_module("attn", CausalSelfAttention(c));
  ln_2_ = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  fc_ = register_module("fc", torch::nn::Linear(c.d_model, hidden));
  fc_proj_ = register_module("fc_proj", torch::nn::Linear(hidden, c.d_model));
}

torch::Tensor GptBlockImpl::forward(const torch::Tensor& x, const AttentionBias& bias) {
  auto h = x + attn_->forward(ln_1_->forward(x), bias);
  auto m = fc_proj_->forward(torch::gelu(fc_->forward(ln_2_->forward(h))));
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
    if (p.dim() == 1) {
      if (name.find("ln_") != std::string::npos && name.find(".weight") != std::string::npos) {
        p.fill_(1.0);
      } else {
        p.zero_();
      }
    } else if (name.find("proj.weight") != std::string::npos) {
      p.normal_(0.0, residual_std);
    } else {
      p.normal_(0.0, c.init_std);
    }
  }
}

AttentionBias GptImpl::BiasFor(int64_t t, const torch::Device& device) {
  auto positions = torch::arange(t, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  AttentionBias bias;
  bias.alibi = slopes_ * positions.view({1, 1, t});
  bias.causal_mask =
      torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(device)).triu(1);
  return bias;
}

torch::Tensor GptImpl::forward(const torch::Tensor& tokens) {
  auto x = wte_->forward(tokens);
  if (config_.dropout > 0 && is_training()) x = torch::dropout(x, config_.dropout, true);
  const AttentionBias bias = BiasFor(tokens.size(1), tokens.device());
  for (const auto& block : *blocks_) x = block->as<GptBlock>()->forward(x, bias);
  x = ln_f_->forward(x);
  return torch::matmul(x, wte_->weight.t());
}

torch::Tensor GptImpl::LossSum(const torch::Tensor& tokens, const torch::Tensor& labels) {
  auto logits = forward(tokens);
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32), labels.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

}  // namespace tessera::engine
