#include "worker/engine/train/flat_parameters.h"

namespace tessera::engine {

FlatParameters::FlatParameters(torch::nn::Module& module, int64_t shard_count)
    : shard_count_(std::max<int64_t>(1, shard_count)) {
  auto parameters = module.parameters();
  for (const auto& p : parameters) numel_ += p.numel();
  const int64_t padded = (numel_ + shard_count_ - 1) / shard_count_ * shard_count_;
  const auto& first = parameters.front();
  const auto options = first.options().requires_grad(false);
  params_ = torch::zeros({padded}, options);
  grads_ = torch::zeros({padded}, options);
  decay_mask_ = torch::zeros({padded}, options);
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& p : parameters) {
    const int64_t n = p.numel();
    auto param_view = params_.narrow(0, offset, n).view(p.sizes());
    param_view.copy_(p);
    p.set_data(param_view);
    p.mutable_grad() = grads_.narrow(0, offset, n).view(p.sizes());
    if (p.dim() >= 2) decay_mask_.narrow(0, offset, n).fill_(1.0);
    offset += n;
  }
}

}  // namespace tessera::engine
