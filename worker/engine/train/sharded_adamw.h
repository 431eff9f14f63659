#pragma once
// AdamW (decoupled weight decay, as torch.optim.AdamW) over one shard of the flat parameter
// buffer: this rank owns the shard's parameters, their gradients and the optimizer state.

#include <torch/torch.h>

#include "worker/engine/train/train_config.h"

namespace tessera::engine {

class ShardedAdamW {
 public:
  // `params` and `decay_mask` are views of this rank's shard.
  ShardedAdamW(const OptimizerConfig& config, torch::Tensor params, torch::Tensor decay_mask);

  // One update with the shard's (already averaged and clipped) gradient; `step` counts from 1.
  void Step(const torch::Tensor& grad, double lr, int64_t step);

  torch::Tensor& params() { return params_; }
  torch::Tensor& exp_avg() { return exp_avg_; }
  torch::Tensor& exp_avg_sq() { return exp_avg_sq_; }

 private:
  OptimizerConfig config_;
  torch::Tensor params_, decay_mask_, exp_avg_, exp_avg_sq_, denom_;
};

}  // namespace tessera::engine
