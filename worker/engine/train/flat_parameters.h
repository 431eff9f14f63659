#pragma once
// Sharded data parallelism's memory layout: every parameter of the model lives in one flat
// buffer (the parameters become views into it), and so does every gradient. The buffer is padded
// to a multiple of the shard count; shard i is the slice [i * shard_size, (i + 1) * shard_size).
// The layout of the real elements does not depend on the shard count, so a checkpoint written
// by N ranks loads on M.

#include <torch/torch.h>

#include <cstdint>

namespace tessera::engine {

class FlatParameters {
 public:
  FlatParameters(torch::nn::Module& module, int64_t shard_count);

  int64_t numel() const { return numel_; }
  int64_t padded_numel() const { return params_.numel(); }
  int64_t shard_size() const { return padded_numel() / shard_count_; }
  int64_t shard_count() const { return shard_count_; }

  torch::Tensor& params() { return params_; }
  torch::Tensor& grads() { return grads_; }
  // 1 where weight decay applies (matrices and embeddings), 0 for biases and norms.
  const torch::Tensor& decay_mask() const { return decay_mask_; }

  torch::Tensor ParamShard(int64_t i) { return params_.narrow(0, i * shard_size(), shard_size()); }
  torch::Tensor GradShard(int64_t i) { return grads_.narrow(0, i * shard_size(), shard_size()); }
  torch::Tensor DecayShard(int64_t i) const {
    return decay_mask_.narrow(0, i * shard_size(), shard_size());
  }
  // Real (not padding) elements of shard i: [begin, begin + count) of the flat buffer.
  int64_t ShardBegin(int64_t i) const { return std::min(numel_, i * shard_size()); }
  int64_t ShardCount(int64_t i) const {
    return std::min(numel_, (i + 1) * shard_size()) - ShardBegin(i);
  }

 private:
  int64_t numel_ = 0;
  int64_t shard_count_ = 1;
  torch::Tensor params_, grads_, decay_mask_;
};

}  // namespace tessera::engine
