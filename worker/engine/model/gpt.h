#pragma once
// The GPT decoder tessera-train trains: token embedding (tied to the output layer), pre-norm
// blocks of causal self-attention with an ALiBi bias (no position embedding, so a model also
// runs on longer sequences than it was trained on) and a GELU MLP, and a final LayerNorm.

#include <torch/torch.h>

#include "worker/engine/train/train_config.h"

namespace tessera::engine {

// What every attention layer adds to its scores: ALiBi's slope * key position [H, 1, T] (the
// query-dependent part of ALiBi is constant along a softmax row, so it is left out) and the
// causal mask [T, T] (true above the diagonal).
struct AttentionBias {
  torch::Tensor alibi;
  torch::Tensor causal_mask;
  // Both in one additive [H, T, T] tensor (-inf above the diagonal), when it is small enough to
  // keep: one pass over the scores instead of two, forward and backward.
  torch::Tensor combined;
};

// ALiBi's per-head slopes (Press et al.): a geometric sequence, interleaved for head counts that
// are not powers of two.
std::vector<double> AlibiSlopes(int64_t n_heads);

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const AttentionBias& bias);

 private:
  int64_t n_heads_, head_dim_;
  double dropout_;
  torch::nn::Linear qkv_{nullptr}, proj_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

class GptBlockImpl : public torch::nn::Module {
 public:
  explicit GptBlockImpl(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const AttentionBias& bias);

 private:
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  CausalSelfAttention attn_{nullptr};
  torch::nn::Linear fc_{nullptr}, fc_proj_{nullptr};
  double dropout_;
};
TORCH_MODULE(GptBlock);

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const ModelConfig& c);
  // tokens [B, T] -> logits [B, T, vocab]
  torch::Tensor forward(const torch::Tensor& tokens);
  // Sum over every position of the cross-entropy of predicting `labels` [B, T].
  torch::Tensor LossSum(const torch::Tensor& tokens, const torch::Tensor& labels);
  const ModelConfig& config() const { return config_; }
  // Activation checkpointing: blocks 0, k, 2k, ... keep only their input in training and are
  // recomputed in backward (block_checkpoint.h); 0: none.
  void SetActivationCheckpointing(int64_t every_k_blocks) { checkpoint_every_ = every_k_blocks; }

 private:
  AttentionBias BiasFor(int64_t t, const torch::Device& device);
  AttentionBias cached_bias_;  // for the last sequence length seen

  ModelConfig config_;
  torch::nn::Embedding wte_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::Tensor slopes_;  // [H, 1, 1]
  int64_t checkpoint_every_ = 0;
};
TORCH_MODULE(Gpt);

}  // namespace tessera::engine
