#pragma once
// A mixture-of-experts feed-forward layer, as DBRX trains with MegaBlocks: a linear router scores
// each token against every expert, the token goes to its top-k experts with their softmax
// probabilities renormalised over those k, and each expert (a GELU MLP) computes exactly the
// tokens routed to it. Expert batches are as large as the routing makes them: no capacity, so no
// token is ever dropped. The router learns to spread tokens by Switch Transformer's
// load-balancing loss, computed as MegaBlocks does.
//
// Expert parallelism: over an expert group of P ranks, rank i computes experts [i·E/P,
// (i+1)·E/P) for every token of the group that chose them. Each rank routes its own tokens,
// sends each one to the ranks of its experts (all-to-all, variable sizes), the experts compute,
// and the outputs come back the same way; backward sends the gradients back along both. Every
// rank still has every expert's parameters (the flat buffer and checkpoints are unchanged): an
// expert's gradient is computed on its rank, and zero on the others, whose sum the gradient
// reduction takes anyway.

#include <torch/torch.h>

#include <vector>

#include "worker/engine/dist/communicator.h"

namespace tessera::engine {

struct MoeOutput {
  torch::Tensor y;  // x's shape
  // num_experts * sum over experts of (fraction of the k * N assignments it got) * (its mean
  // router probability): 1 when tokens spread evenly, up to num_experts when they do not.
  torch::Tensor load_balancing_loss;
  torch::Tensor tokens_per_expert;  // [num_experts] int64, summing to k * N
};

class MoeFeedForwardImpl : public torch::nn::Module {
 public:
  MoeFeedForwardImpl(int64_t d_model, int64_t hidden, int64_t num_experts, int64_t top_k);
  // x [..., d_model]
  MoeOutput forward(const torch::Tensor& x);

  int64_t num_experts() const { return num_experts_; }
  int64_t top_k() const { return top_k_; }
  // From now on, split the experts over `group` (null or a group of one: compute them all). Its
  // size must divide the number of experts; the group must outlive the layer's use.
  void SetExpertGroup(Communicator* group);

 private:
  // The experts' outputs for `routed` (the assignments' token rows, sorted by expert; `count`
  // per expert), in the same order.
  torch::Tensor ComputeHere(const torch::Tensor& routed, const std::vector<int64_t>& count,
                            int64_t first_expert);
  torch::Tensor ComputeAcrossGroup(const torch::Tensor& routed,
                                   const torch::Tensor& tokens_per_expert);

  int64_t num_experts_, top_k_;
  Communicator* group_ = nullptr;
  torch::nn::Linear router_{nullptr};
  // Every expert's weights in one tensor each (its own slice along dimension 0), so that the
  // flat parameter buffer and the shards see four parameters, not four per expert.
  torch::Tensor fc_weight_, fc_bias_;            // [E, hidden, d], [E, hidden]
  torch::Tensor fc_proj_weight_, fc_proj_bias_;  // [E, d, hidden], [E, d]
};
TORCH_MODULE(MoeFeedForward);

// y, unchanged; in backward, `loss` also receives the gradient `scale`, as if `scale * loss` had
// been added to what is differentiated. This puts an auxiliary loss into the block's own
// backward: its gradient reaches the block's parameters while they are gathered (per-block
// parameter sharding) and is recomputed with the block (activation checkpointing).
torch::Tensor WithAuxiliaryLoss(const torch::Tensor& y, const torch::Tensor& loss, double scale);

}  // namespace tessera::engine
