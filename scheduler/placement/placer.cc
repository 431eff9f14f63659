#include "scheduler/placement/placer.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "scheduler/placement/gpu_pick.h"
#include "scheduler/placement/preemption.h"
#include "scheduler/placement/queue_order.h"

namespace tessera::scheduler {

struct Placer::Cycle {
  PlacementDecision* decision = nullptr;
  const PlaceOptions* options = nullptr;
  std::vector<bool> pool_reserved;
  std::vector<std::vector<uint32_t>> reserved_by_pool;
  // Preemption searches that failed this cycle, per pool, valid while the pool's epoch holds:
  // [per_node * kPriorityLevels + priority] -> the fewest nodes that could not be cleared.
  struct Memo {
    uint64_t epoch = UINT64_MAX;
    std::vector<int> min_nodes;
  };
  std::vector<Memo> memo;
};

Placer::Placer(const ClusterState& state)
    : capacity_(state.nodes), allocations_(capacity_.node_count()) {
  std::vector<const RunningAllocation*> running;
  running.reserve(state.running.size());
  for (const RunningAllocation& allocation : state.running) running.push_back(&allocation);
  std::sort(
      running.begin(), running.end(),
      [](const RunningAllocation* a, const RunningAllocation* b) { return a->run_id < b->run_id; });
  for (const RunningAllocation* source : running) {
    if (allocations_.Find(source->run_id) != kNoAllocation) continue;  // listed twice
    Allocation allocation;
    allocation.run_id = source->run_id;
    allocation.priority = source->priority;
    allocation.preemptible = source->preemptible;
    allocation.started_at_micros = source->started_at_micros;
    allocation.cpu_only = true;
    for (const NodeAssignment& part : source->nodes) {
      const uint32_t node = capacity_.FindNode(part.node);
      if (node == kNoNode) continue;  // the node left the inventory
      const int units = capacity_.Capacity(node);
      uint64_t mask = 0;
      for (int index : part.gpu_indices) {
        if (index >= 0 && index < units) mask |= uint64_t{1} << index;
      }
      if (part.gpu_indices.empty()) {
        mask = CapacityIndex::FullMask(units);  // a CPU-only run holds the whole node
      } else {
        allocation.cpu_only = false;
      }
      allocation.parts.emplace_back(node, mask);
    }
    allocations_.Add(std::move(allocation), capacity_);
  }
}

PlacementDecision Placer::PlaceQueue(const std::vector<QueuedRun>& queue,
                                     const PlaceOptions& options) {
  PlacementDecision decision;
  Cycle cycle;
  cycle.decision = &decision;
  cycle.options = &options;
  cycle.pool_reserved.assign(capacity_.pool_count(), false);
  cycle.reserved_by_pool.resize(capacity_.pool_count());
  cycle.memo.resize(capacity_.pool_count());

  const std::vector<uint32_t> order = OrderQueue(queue);

  bool exhausted = false;
  for (uint32_t index : order) {
    const QueuedRun& run = queue[index];
    // Nothing free and nothing this run (or any after it, of no higher priority) may preempt:
    // the rest of the queue waits without being examined.
    if (!exhausted && capacity_.available_free_units() == 0 &&
        !allocations_.AnyPreemptibleBelow(run.priority)) {
      exhausted = true;
    }
    if (exhausted) {
      decision.waiting.push_back(Waiting{index, WaitReason::kWaitingForCapacity});
      continue;
    }
    const auto start = options.timings != nullptr ? std::chrono::steady_clock::now()
                                                  : std::chrono::steady_clock::time_point{};
    WaitReason reason = WaitReason::kWaitingForCapacity;
    if (!PlaceRun(cycle, run, &reason)) decision.waiting.push_back(Waiting{index, reason});
    if (options.timings != nullptr) {
      const auto elapsed = std::chrono::steady_clock::now() - start;
      options.timings->push_back(DecisionTiming{
          index, std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()});
    }
  }
  for (const std::vector<uint32_t>& nodes : cycle.reserved_by_pool) {
    for (uint32_t node : nodes) capacity_.SetReserved(node, false);
  }
  return decision;
}

void Placer::CollectCandidates(const ResourceRequest& request) {
  candidates_.clear();
  const std::vector<uint32_t>& pools = capacity_.PoolsFor(request.cluster, request.gpu_type);
  // A CPU-only run goes to CPU-only nodes when the cluster has any; only a cluster of GPU
  // nodes alone lends whole GPU nodes to CPU runs.
  bool cpu_pools_only = false;
  if (request.gpus == 0) {
    for (uint32_t pool_id : pools) {
      cpu_pools_only = cpu_pools_only || capacity_.pool(pool_id).gpus_per_node == 0;
    }
  }
  for (uint32_t pool_id : pools) {
    const CapacityIndex::Pool& pool = capacity_.pool(pool_id);
    if (cpu_pools_only && pool.gpus_per_node != 0) continue;
    Shape shape;
    if (ShapeFor(request, pool.gpus_per_node, &shape) != ShapeError::kNone) continue;
    if (shape.nodes > static_cast<int>(pool.node_count)) continue;
    candidates_.push_back(Candidate{pool_id, shape});
  }
}

bool Placer::PlaceRun(Cycle& cycle, const QueuedRun& run, WaitReason* reason) {
  if (allocations_.Find(run.run_id) != kNoAllocation) {
    *reason = WaitReason::kAlreadyPlaced;
    return false;
  }
  if (!run.request.node_names.empty()) return PlaceNamed(cycle, run, reason);
  CollectCandidates(run.request);
  if (candidates_.empty()) {
    *reason = WaitReason::kNoMatchingNodes;
    return false;
  }
  for (const Candidate& candidate : candidates_) {
    const Shape& shape = candidate.shape;
    if (capacity_.AvailableWithAtLeast(candidate.pool, shape.per_node) < shape.nodes) continue;
    nodes_.clear();
    if (capacity_.SelectNodes(candidate.pool, shape.per_node, shape.nodes, &nodes_)) {
      Commit(cycle, run, candidate, nodes_, false);
      return true;
    }
  }
  if (allocations_.AnyPreemptibleBelow(run.priority)) {
    for (const Candidate& candidate : candidates_) {
      if (capacity_.pool(candidate.pool).schedulable_nodes < candidate.shape.nodes) continue;
      if (TryPreempt(cycle, run, candidate, nullptr)) return true;
    }
  }
  bool could_fit = false;
  for (const Candidate& candidate : candidates_) {
    if (capacity_.pool(candidate.pool).schedulable_nodes < candidate.shape.nodes) continue;
    could_fit = true;
    if (!cycle.pool_reserved[candidate.pool]) {
      nodes_.clear();
      capacity_.MostFreeNodes(candidate.pool, candidate.shape.nodes, &nodes_);
      Reserve(cycle, run, candidate.pool, nodes_);
      *reason = WaitReason::kHoldsReservation;
      return false;
    }
  }
  if (!could_fit) {
    *reason = WaitReason::kNotEnoughSchedulableNodes;
    return false;
  }
  *reason = WaitReason::kWaitingForCapacity;
  for (const Candidate& candidate : candidates_) {
    int reserved_fit = 0;
    for (uint32_t node : cycle.reserved_by_pool[candidate.pool]) {
      if (capacity_.FreeCount(node) >= candidate.shape.per_node) ++reserved_fit;
    }
    if (reserved_fit > 0 &&
        capacity_.AvailableWithAtLeast(candidate.pool, candidate.shape.per_node) + reserved_fit >=
            candidate.shape.nodes) {
      *reason = WaitReason::kBlockedByReservation;
      break;
    }
  }
  return false;
}

bool Placer::PlaceNamed(Cycle& cycle, const QueuedRun& run, WaitReason* reason) {
  const ResourceRequest& request = run.request;
  std::vector<uint32_t> named;
  named.reserve(request.node_names.size());
  *reason = WaitReason::kNoMatchingNodes;
  for (const std::string& name : request.node_names) {
    const uint32_t node = capacity_.FindNode(name);
    if (node == kNoNode || std::find(named.begin(), named.end(), node) != named.end()) {
      return false;
    }
    if (!named.empty() && capacity_.PoolOf(node) != capacity_.PoolOf(named.front())) return false;
    named.push_back(node);
  }
  const uint32_t pool_id = capacity_.PoolOf(named.front());
  const CapacityIndex::Pool& pool = capacity_.pool(pool_id);
  if ((!request.cluster.empty() && request.cluster != pool.cluster) ||
      (!request.gpu_type.empty() && request.gpu_type != pool.gpu_type)) {
    return false;
  }
  Candidate candidate{pool_id, Shape{}};
  if (ShapeFor(request, pool.gpus_per_node, &candidate.shape) != ShapeError::kNone) return false;
  bool reserved = false;
  bool fits = true;
  for (uint32_t node : named) {
    if (!capacity_.Schedulable(node)) {
      *reason = WaitReason::kNotEnoughSchedulableNodes;
      return false;
    }
    reserved = reserved || capacity_.Reserved(node);
    fits = fits && capacity_.FreeCount(node) >= candidate.shape.per_node;
  }
  if (reserved) {
    *reason = fits ? WaitReason::kBlockedByReservation : WaitReason::kWaitingForCapacity;
    return false;
  }
  if (fits) {
    Commit(cycle, run, candidate, named, false);
    return true;
  }
  if (allocations_.AnyPreemptibleBelow(run.priority) && TryPreempt(cycle, run, candidate, &named)) {
    return true;
  }
  if (!cycle.pool_reserved[pool_id]) {
    Reserve(cycle, run, pool_id, named);
    *reason = WaitReason::kHoldsReservation;
    return false;
  }
  *reason = WaitReason::kWaitingForCapacity;
  return false;
}

bool Placer::TryPreempt(Cycle& cycle, const QueuedRun& run, const Candidate& candidate,
                        const std::vector<uint32_t>* explicit_nodes) {
  if (explicit_nodes == nullptr && PreemptionKnownToFail(cycle, candidate, run.priority)) {
    return false;
  }
  victims_.clear();
  const VictimRequest request{candidate.pool, candidate.shape.per_node, candidate.shape.nodes,
                              run.priority, explicit_nodes};
  if (!FindVictims(capacity_, allocations_, request, &victims_)) {
    if (explicit_nodes == nullptr) RememberPreemptionFailure(cycle, candidate, run.priority);
    return false;
  }
  for (uint32_t victim : victims_) {
    cycle.decision->preemptions.push_back(Preemption{allocations_.Get(victim).run_id, run.run_id});
    allocations_.Remove(victim, capacity_);
  }
  if (explicit_nodes != nullptr) {
    Commit(cycle, run, candidate, *explicit_nodes, true);
    return true;
  }
  nodes_.clear();
  // Evicting the victims left enough nodes with per_node free units, so this succeeds.
  if (!capacity_.SelectNodes(candidate.pool, candidate.shape.per_node, candidate.shape.nodes,
                             &nodes_)) {
    return false;
  }
  Commit(cycle, run, candidate, nodes_, true);
  return true;
}

bool Placer::PreemptionKnownToFail(const Cycle& cycle, const Candidate& candidate,
                                   Priority priority) const {
  const Cycle::Memo& memo = cycle.memo[candidate.pool];
  if (memo.epoch != capacity_.epoch(candidate.pool)) return false;
  // A failure for (per', priority', n') rules out every request that needs at least as many
  // units on at least as many nodes with no more victims to choose from.
  for (int per = 1; per <= candidate.shape.per_node; ++per) {
    for (int p = static_cast<int>(priority); p < kPriorityLevels; ++p) {
      if (memo.min_nodes[per * kPriorityLevels + p] <= candidate.shape.nodes) return true;
    }
  }
  return false;
}

void Placer::RememberPreemptionFailure(Cycle& cycle, const Candidate& candidate,
                                       Priority priority) {
  Cycle::Memo& memo = cycle.memo[candidate.pool];
  const uint64_t epoch = capacity_.epoch(candidate.pool);
  if (memo.epoch != epoch) {
    memo.epoch = epoch;
    memo.min_nodes.assign((capacity_.pool(candidate.pool).capacity + 1) * kPriorityLevels, INT_MAX);
  }
  int& slot =
      memo.min_nodes[candidate.shape.per_node * kPriorityLevels + static_cast<int>(priority)];
  slot = std::min(slot, candidate.shape.nodes);
}

void Placer::Commit(Cycle& cycle, const QueuedRun& run, const Candidate& candidate,
                    const std::vector<uint32_t>& nodes, bool after_preemption) {
  Allocation allocation;
  allocation.run_id = run.run_id;
  allocation.priority = run.priority;
  allocation.preemptible = run.preemptible;
  allocation.started_at_micros = cycle.options->now_micros;
  allocation.cpu_only = run.request.gpus == 0;
  allocation.parts.reserve(nodes.size());
  Placement placement;
  placement.run_id = run.run_id;
  placement.after_preemption = after_preemption;
  placement.nodes.reserve(nodes.size());
  for (size_t rank = 0; rank < nodes.size(); ++rank) {
    const uint32_t node = nodes[rank];
    const uint64_t free = capacity_.FreeMask(node);
    const uint64_t mask = allocation.cpu_only
                              ? free
                              : PickUnits(free, capacity_.Capacity(node), candidate.shape.per_node);
    allocation.parts.emplace_back(node, mask);
    NodeAssignment assignment;
    assignment.node = capacity_.NodeName(node);
    assignment.node_rank = static_cast<int>(rank);
    if (!allocation.cpu_only) assignment.gpu_indices = MaskToIndices(mask);
    placement.nodes.push_back(std::move(assignment));
  }
  allocations_.Add(std::move(allocation), capacity_);
  cycle.decision->placements.push_back(std::move(placement));
}

void Placer::Reserve(Cycle& cycle, const QueuedRun& run, uint32_t pool,
                     const std::vector<uint32_t>& nodes) {
  Reservation reservation;
  reservation.run_id = run.run_id;
  for (uint32_t node : nodes) {
    capacity_.SetReserved(node, true);
    reservation.nodes.push_back(capacity_.NodeName(node));
  }
  cycle.pool_reserved[pool] = true;
  cycle.reserved_by_pool[pool] = nodes;
  cycle.decision->reservations.push_back(std::move(reservation));
}

bool Placer::Release(absl::string_view run_id) {
  const uint32_t id = allocations_.Find(run_id);
  if (id == kNoAllocation) return false;
  allocations_.Remove(id, capacity_);
  return true;
}

bool Placer::SetNodeSchedulable(absl::string_view node, bool schedulable) {
  const uint32_t id = capacity_.FindNode(node);
  if (id == kNoNode) return false;
  capacity_.SetSchedulable(id, schedulable);
  return true;
}

int Placer::FreeUnits(absl::string_view node) const {
  const uint32_t id = capacity_.FindNode(node);
  return id == kNoNode ? -1 : capacity_.FreeCount(id);
}

bool Placer::IsPlaced(absl::string_view run_id) const {
  return allocations_.Find(run_id) != kNoAllocation;
}

}  // namespace tessera::scheduler
