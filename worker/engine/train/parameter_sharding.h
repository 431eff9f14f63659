#pragma once
// How a rank holds the model's parameters: which part it owns (and updates with its optimizer,
// and saves), and what it gathers for the forward and backward passes.
//
// Every strategy owns the same part: shard `shard_index` of the flat buffer (flat_parameters.h),
// so checkpoints do not depend on the strategy that wrote them, and load under any other and on
// any number of ranks. What differs is what lives between steps:
//  - SHARD_GRAD_OP and NO_SHARD (ZeRO-2): the full parameters stay gathered on every rank; the
//    gradients of the whole model are reduced once a step (GatheredParameterSharding, here);
//  - FULL_SHARD and HYBRID_SHARD (ZeRO-3): only the shard lives between steps; each block's
//    parameters are gathered just before its forward and again before its backward, and freed
//    after; its gradients are reduced to their owners as backward produces them
//    (BlockParameterSharding, block_parameter_sharding.h).

#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "worker/engine/model/gpt.h"
#include "worker/engine/train/shard_groups.h"
#include "worker/engine/train/train_config.h"

namespace tessera::engine {

class ParameterSharding {
 public:
  ParameterSharding(int64_t numel, int64_t shard_count, int64_t shard_index);
  virtual ~ParameterSharding() = default;

  int64_t numel() const { return numel_; }            // the model's parameters
  int64_t shard_size() const { return shard_size_; }  // with padding
  // The real (not padding) elements this rank owns: [shard_begin, shard_begin + shard_count).
  int64_t shard_begin() const { return shard_begin_; }
  int64_t shard_count() const { return shard_count_; }

  // This rank's shard of the parameters (shard_size elements) and of the weight-decay mask. The
  // optimizer updates the shard in place; a checkpoint is read into it.
  virtual torch::Tensor ParamShard() = 0;
  virtual torch::Tensor DecayShard() = 0;
  // Before a step's first microbatch: gradients zeroed, what every microbatch needs gathered.
  virtual void BeginStep() = 0;
  // After each microbatch's backward.
  virtual void MicrobatchDone() = 0;
  // After the last microbatch: this rank's shard of the gradients summed over every rank.
  virtual torch::Tensor ReduceGradients() = 0;
  // After the shard was changed (an optimizer step, a checkpoint loaded): the next forward sees
  // it.
  virtual void ShardUpdated() = 0;

  // Bytes of parameters this rank holds now (its shard and whatever is gathered), and the most
  // it held at once since it was made.
  virtual int64_t held_bytes() const = 0;
  virtual int64_t peak_held_bytes() const = 0;

 private:
  int64_t numel_, shard_size_, shard_begin_, shard_count_;
};

// The strategy's sharding of `model` over `groups`; FULL_SHARD and HYBRID_SHARD over shard groups
// of more than one rank hook the model's blocks (GptImpl::SetParameterHooks) for as long as the
// result lives (over groups of one, they are SHARD_GRAD_OP's).
std::unique_ptr<ParameterSharding> MakeParameterSharding(Sharding sharding, Gpt& model,
                                                         ShardGroups& groups);

}  // namespace tessera::engine
