// The Placer's quota side: what a team may take, borrowing in the second pass, and the quota
// ledger kept in step with the allocations (the rules are in placer.h and quota_ledger.h).

#include <bit>

#include "scheduler/placement/placer.h"

namespace tessera::scheduler {

void Placer::ChargeQuota(uint32_t id, int delta) {
  const Allocation& allocation = allocations_.Get(id);
  if (allocation.cpu_only) return;  // quotas are of GPUs
  for (const auto& [node, mask] : allocation.parts) {
    quotas_.Charge(allocation.team, capacity_.PoolOf(node), std::popcount(mask), delta);
  }
}

void Placer::RemoveAllocation(uint32_t id) {
  ChargeQuota(id, -1);
  allocations_.Remove(id, capacity_);
}

int Placer::FreeUnitsFor(const ResourceRequest& request) const {
  int free = 0;
  for (uint32_t pool : capacity_.PoolsFor(request.cluster, request.gpu_type)) {
    for (int f = 1; f <= capacity_.pool(pool).capacity; ++f) {
      free += f * static_cast<int>(capacity_.AvailableWithFree(pool, f).size());
    }
  }
  return free;
}

void Placer::QuotaOnlyReason(const QueuedRun& run, Waiting* waiting) {
  if (!quotas_.AnyManaged() || run.request.gpus == 0 || !run.request.node_names.empty()) return;
  CollectCandidates(run.request);
  for (const Candidate& candidate : candidates_) {
    if (WithinQuota(run, candidate)) return;
  }
  if (candidates_.empty()) return;
  QuotaWait(run, candidates_.front().pool,
            run.preemptible ? WaitReason::kWaitingToBorrow : WaitReason::kQuotaReached, waiting);
}

bool Placer::WithinQuota(const QueuedRun& run, const Candidate& candidate) const {
  if (run.request.gpus == 0 || capacity_.pool(candidate.pool).gpus_per_node == 0) return true;
  const int gpus = candidate.shape.nodes * candidate.shape.per_node;
  return gpus <= quotas_.Headroom(run.team, candidate.pool);
}

void Placer::QuotaWait(const QueuedRun& run, uint32_t pool, WaitReason reason,
                       Waiting* waiting) const {
  waiting->reason = reason;
  quotas_.Tightest(run.team, pool, &waiting->quota_used, &waiting->quota);
}

bool Placer::Borrow(Cycle& cycle, const QueuedRun& run) {
  if (!run.request.node_names.empty()) {
    std::vector<uint32_t> named;
    for (const std::string& name : run.request.node_names) {
      const uint32_t node = capacity_.FindNode(name);
      if (node == kNoNode) return false;
      named.push_back(node);
    }
    Candidate candidate{capacity_.PoolOf(named.front()), Shape{}};
    if (ShapeFor(run.request, capacity_.pool(candidate.pool).gpus_per_node, &candidate.shape) !=
        ShapeError::kNone) {
      return false;
    }
    for (uint32_t node : named) {
      if (!capacity_.Available(node) || capacity_.FreeCount(node) < candidate.shape.per_node) {
        return false;
      }
    }
    candidate.within_quota = WithinQuota(run, candidate);
    Commit(cycle, run, candidate, named, false);
    return true;
  }
  CollectCandidates(run.request);
  for (Candidate& candidate : candidates_) {
    const Shape& shape = candidate.shape;
    if (capacity_.AvailableWithAtLeast(candidate.pool, shape.per_node) < shape.nodes) continue;
    nodes_.clear();
    if (capacity_.SelectNodes(candidate.pool, shape.per_node, shape.nodes, &nodes_)) {
      candidate.within_quota = WithinQuota(run, candidate);
      Commit(cycle, run, candidate, nodes_, false);
      return true;
    }
  }
  return false;
}

}  // namespace tessera::scheduler
