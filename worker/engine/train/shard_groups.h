#pragma once
// The process groups a sharded trainer talks over, from its sharding strategy and its rank:
// the world; its shard group (the ranks that together hold one replica of the parameters, one
// shard each); and its replica group (the ranks that hold the same shard in every replica).
// FULL_SHARD and SHARD_GRAD_OP are one shard group of the whole world, NO_SHARD a group of one
// per rank, and
// HYBRID_SHARD shards within groups of fsdp.shard_group_size (a node's ranks by default) and
// replicates across them. A mixture of experts adds its expert-parallel group: consecutive ranks
// in groups of model.moe_world_size.

#include <torch/torch.h>

#include <memory>

#include "absl/status/statusor.h"
#include "worker/engine/dist/communicator.h"
#include "worker/engine/dist/peer_waits.h"
#include "worker/engine/train/rank_context.h"
#include "worker/engine/train/train_config.h"

namespace tessera::engine {

class ShardGroups {
 public:
  // Joins the other ranks through the rendezvous store that rank 0 serves (NCCL on a CUDA
  // device, Gloo otherwise); a world of one talks to no one. An error where the shard group
  // size does not divide the world, or the others cannot be reached. Every blocking call on
  // the groups is a wait of `waits` when given (it must outlive the groups).
  static absl::StatusOr<std::unique_ptr<ShardGroups>> Join(const TrainConfig& config,
                                                           const RankContext& ctx, bool cuda,
                                                           PeerWaits* waits = nullptr);

  int shard_group_size() const { return shard_group_size_; }
  int shard_index() const { return shard_index_; }  // this rank's rank in its shard group
  int replicas() const { return replicas_; }
  // This rank keeps a shard's only copy on disk: the first replica writes checkpoints.
  bool writes_shard() const { return first_replica_; }
  bool nccl() const { return world_->backend() == "nccl"; }

  Communicator& world() { return *world_; }
  Communicator& shard_group() { return *shard_group_; }
  Communicator& replica_group() { return *replica_group_; }
  Communicator& expert_group() { return *expert_group_; }

  // Sums every rank's gradients (`grads`, the full flat buffer) into this rank's shard: with
  // NCCL a reduce-scatter within the shard group into `grad_shard`, then an all-reduce across
  // the replicas; Gloo has no reduce-scatter, so the whole buffer is all-reduced and the rank
  // reads its part of it.
  void ReduceGradients(torch::Tensor& grads, torch::Tensor& grad_shard);

 private:
  ShardGroups() = default;

  int shard_group_size_ = 1;
  int shard_index_ = 0;
  int replicas_ = 1;
  bool first_replica_ = true;
  // Declared first, so destroyed last: the communicators were made over it.
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<Communicator> world_, shard_group_, replica_group_, expert_group_;
};

}  // namespace tessera::engine
