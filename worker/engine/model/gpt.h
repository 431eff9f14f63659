#pragma once
// The GPT decoder tessera-train trains: token embedding (tied to the output layer), pre-norm
// blocks of causal self-attention with an ALiBi bias (no position embedding, so a model also
// runs on longer sequences than it was trained on) and a GELU MLP, or a mixture of GELU experts
// (model/moe.h), and a final LayerNorm.

#include <torch/torch.h>

#include <string>
#include <vector>

#include "worker/engine/model/moe.h"
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
  // LibTorch 2 on a GPU: scaled-dot-product attention's fused kernels (default), or the
  // explicit product, softmax and product (the reference the GPU check compares them with).
  // LibTorch 1.13 has no fused attention: always the explicit one.
  void set_fused(bool fused) { fused_attention_ = fused; }

 private:
  int64_t n_heads_, head_dim_;
  double dropout_;
  bool fused_attention_ = true;
  torch::nn::Linear qkv_{nullptr}, proj_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

class GptBlockImpl : public torch::nn::Module {
 public:
  explicit GptBlockImpl(const ModelConfig& c);
  // An MoE block's load-balancing loss joins its backward with the gradient
  // `load_balancing_scale` (WithAuxiliaryLoss): 0 trains the router by the language loss alone.
  torch::Tensor forward(const torch::Tensor& x, const AttentionBias& bias,
                        double load_balancing_scale = 0);
  // The last forward's (MoE blocks; undefined otherwise), without autograd.
  const torch::Tensor& load_balancing_loss() const { return load_balancing_loss_; }
  const torch::Tensor& tokens_per_expert() const { return tokens_per_expert_; }
  CausalSelfAttentionImpl& attention() { return *attn_; }
  // Expert parallelism (MoE blocks; a dense block ignores it): see MoeFeedForwardImpl.
  void SetExpertGroup(Communicator* group) {
    if (moe_) moe_->SetExpertGroup(group);
  }

 private:
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  CausalSelfAttention attn_{nullptr};
  torch::nn::Linear fc_{nullptr}, fc_proj_{nullptr};  // dense
  MoeFeedForward moe_{nullptr};
  double dropout_;
  torch::Tensor load_balancing_loss_, tokens_per_expert_;
};
TORCH_MODULE(GptBlock);

// What the model calls around each block so that the block's parameters are present exactly
// while they are used: per-block parameter sharding (ZeRO-3, train/parameter_sharding.h) gathers
// them before and frees them after. The backward calls come from autograd hooks on the block's
// output (before its backward) and input (after it, every gradient of the block accumulated).
class BlockParameterHooks {
 public:
  virtual ~BlockParameterHooks() = default;
  virtual void BeforeForward(int64_t block) = 0;
  // `backward_follows`: autograd will come back through this block in this step.
  virtual void AfterForward(int64_t block, bool backward_follows) = 0;
  virtual void BeforeBackward(int64_t block) = 0;
  virtual void AfterBackward(int64_t block) = 0;
};

// Parameters that are gathered and freed together: each block's, and the rest (the embedding,
// used first and last, and the final norm), which a step keeps from its start to its end.
struct ParameterUnit {
  std::string name;
  int64_t block = -1;  // -1: the rest
  std::vector<torch::Tensor> parameters;
};

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const ModelConfig& c);
  // tokens [B, T] -> logits [B, T, vocab]
  torch::Tensor forward(const torch::Tensor& tokens);
  // Sum over every position of the cross-entropy of predicting `labels` [B, T].
  torch::Tensor LossSum(const torch::Tensor& tokens, const torch::Tensor& labels);
  // Mixture of experts: what backward adds to what it differentiates, per forward from now on:
  // `scale` * the mean over blocks of their load-balancing losses. The trainer sets
  // moe_loss_weight * (the micro-batch's share of the step's tokens).
  void SetLoadBalancingScale(double scale) { load_balancing_scale_ = scale; }
  // Every block's attention fused or explicit (CausalSelfAttentionImpl::set_fused).
  void SetFusedAttention(bool fused) {
    for (int64_t b = 0; b < block_count(); ++b) block(b).attention().set_fused(fused);
  }
  // Every MoE block's experts split over `group` from now on (model.moe_world_size).
  void SetExpertGroup(Communicator* group) {
    for (int64_t b = 0; b < block_count(); ++b) block(b).SetExpertGroup(group);
  }
  // The last forward's mean over blocks (an MoE model's; undefined for a dense one).
  torch::Tensor LoadBalancingLoss();
  const ModelConfig& config() const { return config_; }
  // Activation checkpointing: blocks 0, k, 2k, ... keep only their input in training and are
  // recomputed in backward (block_checkpoint.h); 0: none.
  void SetActivationCheckpointing(int64_t every_k_blocks) { checkpoint_every_ = every_k_blocks; }
  // Called around each block from now on; null: none (every parameter always present).
  void SetParameterHooks(BlockParameterHooks* hooks) { hooks_ = hooks; }
  // The rest first, then the blocks in order; every parameter in exactly one.
  std::vector<ParameterUnit> ParameterUnits();
  int64_t block_count() const { return static_cast<int64_t>(blocks_->size()); }
  GptBlockImpl& block(int64_t i) { return *blocks_[static_cast<size_t>(i)]->as<GptBlock>(); }

 private:
  AttentionBias BiasFor(int64_t t, const torch::Device& device);
  AttentionBias cached_bias_;  // for the last sequence length seen

  ModelConfig config_;
  torch::nn::Embedding wte_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::Tensor slopes_;  // [H, 1, 1]
  int64_t checkpoint_every_ = 0;
  BlockParameterHooks* hooks_ = nullptr;
  double load_balancing_scale_ = 0;
};
TORCH_MODULE(Gpt);

}  // namespace tessera::engine
