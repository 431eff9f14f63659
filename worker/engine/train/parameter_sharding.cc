#include "worker/engine/train/parameter_sharding.h"

#include <algorithm>

#include "worker/engine/train/block_parameter_sharding.h"
#include "worker/engine/train/flat_parameters.h"

namespace tessera::engine {
namespace {

// ZeRO-2: every rank keeps the full parameters in one flat buffer, gathered again after each
// update; the whole gradient buffer is reduced once a step.
class GatheredParameterSharding final : public ParameterSharding {
 public:
  GatheredParameterSharding(Gpt& model, ShardGroups& groups, int64_t numel)
      : ParameterSharding(numel, groups.shard_group_size(), groups.shard_index()),
        groups_(groups),
        flat_(*model, groups.shard_group_size()) {
    if (groups_.nccl()) grad_shard_ = torch::zeros_like(flat_.ParamShard(0));
    full_bytes_ = flat_.padded_numel() * static_cast<int64_t>(flat_.params().element_size());
  }

  torch::Tensor ParamShard() override { return flat_.ParamShard(groups_.shard_index()); }
  torch::Tensor DecayShard() override { return flat_.DecayShard(groups_.shard_index()); }
  void BeginStep() override { flat_.grads().zero_(); }
  void MicrobatchDone() override {}
  torch::Tensor ReduceGradients() override {
    groups_.ReduceGradients(flat_.grads(), grad_shard_);
    return groups_.nccl() ? grad_shard_ : flat_.GradShard(groups_.shard_index());
  }
  void ShardUpdated() override { groups_.shard_group().AllGather(flat_.params()); }
  int64_t held_bytes() const override { return full_bytes_; }
  int64_t peak_held_bytes() const override { return full_bytes_; }

 private:
  ShardGroups& groups_;
  FlatParameters flat_;
  torch::Tensor grad_shard_;  // NCCL: the reduce-scatter's output
  int64_t full_bytes_ = 0;
};

int64_t CountParameters(const Gpt& model) {
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  return n;
}

}  // namespace

ParameterSharding::ParameterSharding(int64_t numel, int64_t shard_count, int64_t shard_index)
    : numel_(numel) {
  shard_count = std::max<int64_t>(1, shard_count);
  shard_size_ = (numel + shard_count - 1) / shard_count;
  shard_begin_ = std::min(numel, shard_index * shard_size_);
  shard_count_ = std::min(numel, (shard_index + 1) * shard_size_) - shard_begin_;
}

std::unique_ptr<ParameterSharding> MakeParameterSharding(Sharding sharding, Gpt& model,
                                                         ShardGroups& groups) {
  const int64_t numel = CountParameters(model);
  switch (sharding) {
    case Sharding::kFullShard:
    case Sharding::kHybridShard:
      // A shard group of one holds the whole model either way: gathering it block by block
      // would only add copies (and the blocks in flight to the memory).
      if (groups.shard_group_size() == 1) break;
      return std::make_unique<BlockParameterSharding>(model, groups, numel);
    case Sharding::kShardGradOp:
    case Sharding::kNoShard:
      break;
  }
  return std::make_unique<GatheredParameterSharding>(model, groups, numel);
}

}  // namespace tessera::engine
