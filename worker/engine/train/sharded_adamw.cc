#include "worker/engine/train/sharded_adamw.h"

#include <cmath>

namespace tessera::engine {

ShardedAdamW::ShardedAdamW(const OptimizerConfig& config, torch::Tensor params,
                           torch::Tensor decay_mask)
    : config_(config),
      params_(std::move(params)),
      decay_mask_(std::move(decay_mask)),
      exp_avg_(torch::zeros_like(params_)),
      exp_avg_sq_(torch::zeros_like(params_)),
      denom_(torch::empty_like(params_)) {}

void ShardedAdamW::Step(const torch::Tensor& grad, double lr, int64_t step) {
  torch::NoGradGuard no_grad;
  const double b1 = config_.beta1, b2 = config_.beta2;
  if (config_.weight_decay > 0) {
    params_.addcmul_(params_, decay_mask_, -lr * config_.weight_decay);
  }
  exp_avg_.mul_(b1).add_(grad, 1.0 - b1);
  exp_avg_sq_.mul_(b2).addcmul_(grad, grad, 1.0 - b2);
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(b2, static_cast<double>(step));
  // One scratch buffer for the denominator, reused every step: no allocation per step.
  torch::sqrt_out(denom_, exp_avg_sq_).div_(std::sqrt(bias2)).add_(config_.eps);
  params_.addcdiv_(exp_avg_, denom_, -lr / bias1);
}

}  // namespace tessera::engine
