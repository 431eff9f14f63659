#include "worker/engine/train/shard_groups.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tessera::engine {
namespace {

std::vector<int> Range(int first, int count, int stride) {
  std::vector<int> v;
  for (int i = 0; i < count; ++i) v.push_back(first + i * stride);
  return v;
}

int ShardGroupSize(const TrainConfig& config, const RankContext& ctx) {
  switch (config.sharding) {
    case Sharding::kFullShard:
    case Sharding::kShardGradOp:
      return ctx.world_size;
    case Sharding::kNoShard:
      return 1;
    case Sharding::kHybridShard:
      return config.shard_group_size > 0 ? config.shard_group_size : ctx.local_world_size;
  }
  return ctx.world_size;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardGroups>> ShardGroups::Join(const TrainConfig& config,
                                                               const RankContext& ctx, bool cuda,
                                                               PeerWaits* waits) {
  std::unique_ptr<ShardGroups> g(new ShardGroups());
  g->shard_group_size_ = ShardGroupSize(config, ctx);
  if (g->shard_group_size_ <= 0 || ctx.world_size % g->shard_group_size_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat("fsdp.shard_group_size: ", g->shard_group_size_,
                                                   " does not divide the world size ",
                                                   ctx.world_size));
  }
  const auto experts = static_cast<int>(config.model.moe_world_size);
  if (experts <= 0 || ctx.world_size % experts != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.moe_world_size: ", experts, " does not divide the world size ", ctx.world_size));
  }
  g->shard_index_ = ctx.rank % g->shard_group_size_;
  g->replicas_ = ctx.world_size / g->shard_group_size_;
  g->first_replica_ = ctx.rank < g->shard_group_size_;
  if (ctx.world_size == 1) {
    g->world_ = std::make_unique<SoloCommunicator>();
    g->shard_group_ = std::make_unique<SoloCommunicator>();
    g->replica_group_ = std::make_unique<SoloCommunicator>();
    g->expert_group_ = std::make_unique<SoloCommunicator>();
    return g;
  }
  Rendezvous rv{ctx.rank, ctx.world_size, ctx.master_addr, ctx.master_port};
  TESSERA_ASSIGN_OR_RETURN(g->store_, ConnectStore(rv));
  const auto backend = cuda ? CollectiveBackend::kNccl : CollectiveBackend::kGloo;
  const std::string host = DefaultGlooHost(ctx.master_addr);
  const int size = g->shard_group_size_;
  const int group = ctx.rank / size;
  TESSERA_ASSIGN_OR_RETURN(
      g->world_, CreateCommunicator(backend, g->store_, "world/", Range(0, ctx.world_size, 1),
                                    ctx.rank, host, rv.timeout));
  TESSERA_ASSIGN_OR_RETURN(
      g->shard_group_,
      CreateCommunicator(backend, g->store_, absl::StrCat("shard-", group, "/"),
                         Range(group * size, size, 1), ctx.rank, host, rv.timeout));
  TESSERA_ASSIGN_OR_RETURN(
      g->replica_group_,
      CreateCommunicator(backend, g->store_, absl::StrCat("replica-", g->shard_index_, "/"),
                         Range(g->shard_index_, g->replicas_, size), ctx.rank, host, rv.timeout));
  if (experts == 1) {
    g->expert_group_ = std::make_unique<SoloCommunicator>();
  } else {
    const int expert_group = ctx.rank / experts;
    TESSERA_ASSIGN_OR_RETURN(
        g->expert_group_,
        CreateCommunicator(backend, g->store_, absl::StrCat("experts-", expert_group, "/"),
                           Range(expert_group * experts, experts, 1), ctx.rank, host, rv.timeout));
  }
  if (waits != nullptr) {
    for (auto* group : {&g->world_, &g->shard_group_, &g->replica_group_, &g->expert_group_}) {
      if ((*group)->size() > 1) *group = MarkPeerWaits(std::move(*group), *waits);
    }
  }
  return g;
}

void ShardGroups::ReduceGradients(torch::Tensor& grads, torch::Tensor& grad_shard) {
  if (nccl()) {
    shard_group_->ReduceScatterSum(grads, grad_shard);
    replica_group_->AllReduceSum(grad_shard);
  } else {
    world_->AllReduceSum(grads);
  }
}

}  // namespace tessera::engine
