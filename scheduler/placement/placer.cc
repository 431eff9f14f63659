#include "scheduler/placement/placer.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>

#include "absl/strings/str_cat.h"
#include "scheduler/placement/gpu_pick.h"
#include "scheduler/placement/preemption.h"
#include "scheduler/placement/queue_order.h"

namespace tessera::scheduler {
namespace {

// Keeps the nodes a run avoids unschedulable while it is placed, then gives them back: nothing
// of the run's placement (a selection, a preemption, a reservation) can fall on them.
class AvoidedNodes {
 public:
  AvoidedNodes(CapacityIndex& capacity, const std::vector<std::string>& names)
      : capacity_(capacity) {
    for (const std::string& name : names) {
      const uint32_t id = capacity_.FindNode(name);
      if (id == kNoNode || !capacity_.Schedulable(id)) continue;
      capacity_.SetSchedulable(id, false);
      hidden_.push_back(id);
    }
  }
  ~AvoidedNodes() {
    for (uint32_t id : hidden_) capacity_.SetSchedulable(id, true);
  }
  AvoidedNodes(const AvoidedNodes&) = delete;
  AvoidedNodes& operator=(const AvoidedNodes&) = delete;

 private:
  CapacityIndex& capacity_;
  std::vector<uint32_t> hidden_;
};

}  // namespace

// Preemption searches that failed this cycle, valid while the pool's epoch holds:
// [per_node * kPriorityLevels + priority] -> the fewest nodes that could not be cleared. With
// reclaiming, the victims also depend on the claimant's team, so each team has its own. (A team
// that goes over its quota elsewhere in the cluster during the cycle may make more victims
// eligible than a memo knows of; the next cycle searches again.)
struct Placer::Memo {
  uint64_t epoch = UINT64_MAX;
  std::vector<int> min_nodes;
};

struct Placer::Cycle {
  PlacementDecision* decision = nullptr;
  const PlaceOptions* options = nullptr;
  std::vector<bool> pool_reserved;
  std::vector<std::vector<uint32_t>> reserved_by_pool;
  std::vector<int> reservation_of;  // by pool: its reservation's index in the decision (-1)
  std::vector<Memo> memo;
  absl::flat_hash_map<std::string, Memo> reclaim_memo;  // by pool and team
  // Set by PlaceRun when the run, not placed within its quota, may borrow: it is tried again
  // once every run has had its turn (positions in decision->waiting).
  bool borrow_later = false;
  std::vector<size_t> borrowers;
};

Placer::Placer(const ClusterState& state) : Placer(CapacityIndex(state.nodes), state) {}

Placer::Placer(CapacityIndex nodes, const ClusterState& state)
    : capacity_(std::move(nodes)),
      allocations_(capacity_.node_count()),
      quotas_(state.quotas, capacity_) {
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
    allocation.team = source->team;
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
    ChargeQuota(allocations_.Add(std::move(allocation), capacity_), 1);
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
  cycle.reservation_of.assign(capacity_.pool_count(), -1);
  cycle.memo.resize(capacity_.pool_count());

  const std::vector<uint32_t> order = OrderQueue(queue);

  bool exhausted = false;
  for (uint32_t index : order) {
    const QueuedRun& run = queue[index];
    // Nothing free and nothing this run (or any after it, of no higher priority) may preempt:
    // the rest of the queue waits without being examined.
    if (!exhausted && capacity_.available_free_units() == 0 &&
        !allocations_.AnyPreemptibleBelow(run.priority) && !quotas_.AnyBorrowing()) {
      exhausted = true;
    }
    if (exhausted) {
      Waiting waiting{index, WaitReason::kWaitingForCapacity};
      QuotaOnlyReason(run, &waiting);
      decision.waiting.push_back(waiting);
      continue;
    }
    const auto start = options.timings != nullptr ? std::chrono::steady_clock::now()
                                                  : std::chrono::steady_clock::time_point{};
    Waiting waiting{index, WaitReason::kWaitingForCapacity};
    cycle.borrow_later = false;
    if (!PlaceRun(cycle, run, &waiting)) {
      if (cycle.borrow_later) cycle.borrowers.push_back(decision.waiting.size());
      decision.waiting.push_back(waiting);
    }
    if (options.timings != nullptr) {
      const auto elapsed = std::chrono::steady_clock::now() - start;
      options.timings->push_back(DecisionTiming{
          index, std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()});
    }
  }
  // Borrowing comes last: idle GPUs go to runs within their quota first, so that a run is
  // never placed and reclaimed in one cycle. Reservations still hold.
  if (!cycle.borrowers.empty()) {
    std::vector<bool> placed(decision.waiting.size(), false);
    for (size_t position : cycle.borrowers) {
      if (capacity_.available_free_units() == 0) break;
      placed[position] = Borrow(cycle, queue[decision.waiting[position].queue_index]);
    }
    size_t kept = 0;
    for (size_t i = 0; i < decision.waiting.size(); ++i) {
      if (!placed[i]) decision.waiting[kept++] = decision.waiting[i];
    }
    decision.waiting.resize(kept);
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

bool Placer::PlaceRun(Cycle& cycle, const QueuedRun& run, Waiting* waiting) {
  if (allocations_.Find(run.run_id) != kNoAllocation) {
    waiting->reason = WaitReason::kAlreadyPlaced;
    return false;
  }
  if (!run.request.node_names.empty()) return PlaceNamed(cycle, run, waiting);
  const AvoidedNodes avoided(capacity_, run.avoid_nodes);
  CollectCandidates(run.request);
  if (candidates_.empty()) {
    waiting->reason = WaitReason::kNoMatchingNodes;
    return false;
  }
  // Where the run stays within its team's quota; elsewhere it may only borrow idle GPUs, and
  // only when it is preemptible.
  bool any_within = false;
  for (Candidate& candidate : candidates_) {
    candidate.within_quota = WithinQuota(run, candidate);
    any_within = any_within || candidate.within_quota;
  }
  if (!any_within && !run.preemptible) {
    QuotaWait(run, candidates_.front().pool, WaitReason::kQuotaReached, waiting);
    return false;
  }
  bool may_borrow = false;
  for (const Candidate& candidate : candidates_) {
    may_borrow = may_borrow || (!candidate.within_quota && run.preemptible);
    if (!candidate.within_quota) continue;
    const Shape& shape = candidate.shape;
    if (capacity_.AvailableWithAtLeast(candidate.pool, shape.per_node) < shape.nodes) continue;
    nodes_.clear();
    if (capacity_.SelectNodes(candidate.pool, shape.per_node, shape.nodes, &nodes_)) {
      Commit(cycle, run, candidate, nodes_, false);
      return true;
    }
  }
  cycle.borrow_later = may_borrow;
  if (!any_within) {
    QuotaWait(run, candidates_.front().pool, WaitReason::kWaitingToBorrow, waiting);
    return false;
  }
  // From here on only where the run is within its quota: borrowing neither preempts nor
  // reserves.
  if (allocations_.AnyPreemptibleBelow(run.priority) || quotas_.AnyBorrowing()) {
    for (const Candidate& candidate : candidates_) {
      if (!candidate.within_quota) continue;
      if (capacity_.pool(candidate.pool).schedulable_nodes < candidate.shape.nodes) continue;
      if (TryPreempt(cycle, run, candidate, nullptr)) return true;
    }
  }
  if (run.min_nodes > 0 && Shrink(cycle, run)) return true;
  bool could_fit = false;
  for (const Candidate& candidate : candidates_) {
    if (!candidate.within_quota) continue;
    if (capacity_.pool(candidate.pool).schedulable_nodes < candidate.shape.nodes) continue;
    could_fit = true;
    if (!cycle.pool_reserved[candidate.pool]) {
      nodes_.clear();
      capacity_.MostFreeNodes(candidate.pool, candidate.shape.nodes, &nodes_);
      Reserve(cycle, run, candidate.pool, nodes_);
      waiting->reason = WaitReason::kHoldsReservation;
      return false;
    }
  }
  if (!could_fit) {
    waiting->reason = WaitReason::kNotEnoughSchedulableNodes;
    return false;
  }
  waiting->reason = WaitReason::kWaitingForCapacity;
  for (const Candidate& candidate : candidates_) {
    if (!candidate.within_quota) continue;
    int reserved_fit = 0;
    for (uint32_t node : cycle.reserved_by_pool[candidate.pool]) {
      if (capacity_.FreeCount(node) >= candidate.shape.per_node) ++reserved_fit;
    }
    if (reserved_fit > 0 &&
        capacity_.AvailableWithAtLeast(candidate.pool, candidate.shape.per_node) + reserved_fit >=
            candidate.shape.nodes) {
      waiting->reason = WaitReason::kBlockedByReservation;
      waiting->reservation = cycle.reservation_of[candidate.pool];
      break;
    }
  }
  return false;
}

bool Placer::CanGrow(absl::string_view run_id, absl::string_view team,
                     const ResourceRequest& request) const {
  const uint32_t id = allocations_.Find(run_id);
  if (id == kNoAllocation) return false;
  const Allocation& allocation = allocations_.Get(id);
  if (allocation.parts.empty()) return false;
  const uint32_t pool = capacity_.PoolOf(allocation.parts.front().first);
  Shape shape;
  if (ShapeFor(request, capacity_.pool(pool).gpus_per_node, &shape) != ShapeError::kNone) {
    return false;
  }
  const int held = static_cast<int>(allocation.parts.size());
  if (held >= shape.nodes) return false;
  if (capacity_.AvailableWithAtLeast(pool, shape.per_node) < shape.nodes - held) return false;
  if (allocation.cpu_only || capacity_.pool(pool).gpus_per_node == 0) return true;
  return (shape.nodes - held) * shape.per_node <= quotas_.Headroom(team, pool);
}

bool Placer::Shrink(Cycle& cycle, const QueuedRun& run) {
  const Candidate* best = nullptr;
  int best_nodes = 0;
  for (const Candidate& candidate : candidates_) {
    if (!candidate.within_quota) continue;
    const int nodes =
        std::min(capacity_.AvailableWithAtLeast(candidate.pool, candidate.shape.per_node),
                 candidate.shape.nodes - 1);
    if (nodes >= run.min_nodes && nodes > best_nodes) {
      best = &candidate;
      best_nodes = nodes;
    }
  }
  if (best == nullptr) return false;
  nodes_.clear();
  if (!capacity_.SelectNodes(best->pool, best->shape.per_node, best_nodes, &nodes_)) return false;
  Commit(cycle, run, *best, nodes_, false);
  return true;
}

bool Placer::PlaceNamed(Cycle& cycle, const QueuedRun& run, Waiting* waiting) {
  const ResourceRequest& request = run.request;
  std::vector<uint32_t> named;
  named.reserve(request.node_names.size());
  waiting->reason = WaitReason::kNoMatchingNodes;
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
  candidate.within_quota = WithinQuota(run, candidate);
  if (!candidate.within_quota && !run.preemptible) {
    QuotaWait(run, pool_id, WaitReason::kQuotaReached, waiting);
    return false;
  }
  bool reserved = false;
  bool fits = true;
  for (uint32_t node : named) {
    if (!capacity_.Schedulable(node)) {
      waiting->reason = WaitReason::kNotEnoughSchedulableNodes;
      return false;
    }
    reserved = reserved || capacity_.Reserved(node);
    fits = fits && capacity_.FreeCount(node) >= candidate.shape.per_node;
  }
  if (reserved) {
    waiting->reason = fits ? WaitReason::kBlockedByReservation : WaitReason::kWaitingForCapacity;
    if (fits) waiting->reservation = cycle.reservation_of[pool_id];
    return false;
  }
  if (!candidate.within_quota) {
    cycle.borrow_later = true;
    QuotaWait(run, pool_id, WaitReason::kWaitingToBorrow, waiting);
    return false;
  }
  if (fits) {
    Commit(cycle, run, candidate, named, false);
    return true;
  }
  if ((allocations_.AnyPreemptibleBelow(run.priority) || quotas_.AnyBorrowing()) &&
      TryPreempt(cycle, run, candidate, &named)) {
    return true;
  }
  if (!cycle.pool_reserved[pool_id]) {
    Reserve(cycle, run, pool_id, named);
    waiting->reason = WaitReason::kHoldsReservation;
    return false;
  }
  waiting->reason = WaitReason::kWaitingForCapacity;
  return false;
}

bool Placer::TryPreempt(Cycle& cycle, const QueuedRun& run, const Candidate& candidate,
                        const std::vector<uint32_t>* explicit_nodes) {
  // Borrowed GPUs may be taken back only in a managed cluster, by a run within its quota (the
  // callers only try such candidates).
  const bool reclaim = quotas_.AnyBorrowing() && quotas_.Managed(candidate.pool);
  if (!reclaim && !allocations_.AnyPreemptibleBelow(run.priority)) return false;
  const std::string* team = reclaim ? &run.team : nullptr;
  if (explicit_nodes == nullptr && PreemptionKnownToFail(cycle, candidate, run.priority, team)) {
    return false;
  }
  const ReclaimRule rule{&quotas_, run.team, candidate.pool};
  victims_.clear();
  const VictimRequest request{candidate.pool, candidate.shape.per_node, candidate.shape.nodes,
                              run.priority,   explicit_nodes,           reclaim ? &rule : nullptr};
  if (!FindVictims(capacity_, allocations_, request, &victims_)) {
    if (explicit_nodes == nullptr) {
      RememberPreemptionFailure(cycle, candidate, run.priority, team);
    }
    return false;
  }
  // Each victim's cause, before any leaves (a team's excess shrinks as its runs go).
  for (uint32_t victim : victims_) {
    const Allocation& allocation = allocations_.Get(victim);
    cycle.decision->preemptions.push_back(
        Preemption{allocation.run_id, run.run_id, reclaim && rule.Reclaimable(allocation)});
  }
  for (uint32_t victim : victims_) RemoveAllocation(victim);
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

Placer::Memo& Placer::MemoFor(Cycle& cycle, uint32_t pool, const std::string* reclaiming_team) {
  Memo& memo = reclaiming_team == nullptr
                   ? cycle.memo[pool]
                   : cycle.reclaim_memo[absl::StrCat(pool, "/", *reclaiming_team)];
  const uint64_t epoch = capacity_.epoch(pool);
  if (memo.epoch != epoch) {
    memo.epoch = epoch;
    memo.min_nodes.assign((capacity_.pool(pool).capacity + 1) * kPriorityLevels, INT_MAX);
  }
  return memo;
}

bool Placer::PreemptionKnownToFail(Cycle& cycle, const Candidate& candidate, Priority priority,
                                   const std::string* reclaiming_team) {
  const Memo& memo = MemoFor(cycle, candidate.pool, reclaiming_team);
  // A failure for (per', priority', n') rules out every request that needs at least as many
  // units on at least as many nodes with no more victims to choose from.
  for (int per = 1; per <= candidate.shape.per_node; ++per) {
    for (int p = static_cast<int>(priority); p < kPriorityLevels; ++p) {
      if (memo.min_nodes[per * kPriorityLevels + p] <= candidate.shape.nodes) return true;
    }
  }
  return false;
}

void Placer::RememberPreemptionFailure(Cycle& cycle, const Candidate& candidate, Priority priority,
                                       const std::string* reclaiming_team) {
  Memo& memo = MemoFor(cycle, candidate.pool, reclaiming_team);
  int& slot =
      memo.min_nodes[candidate.shape.per_node * kPriorityLevels + static_cast<int>(priority)];
  slot = std::min(slot, candidate.shape.nodes);
}

void Placer::Commit(Cycle& cycle, const QueuedRun& run, const Candidate& candidate,
                    const std::vector<uint32_t>& nodes, bool after_preemption) {
  Allocation allocation;
  allocation.run_id = run.run_id;
  allocation.team = run.team;
  allocation.priority = run.priority;
  allocation.preemptible = run.preemptible;
  allocation.started_at_micros = cycle.options->now_micros;
  allocation.cpu_only = run.request.gpus == 0;
  allocation.parts.reserve(nodes.size());
  Placement placement;
  placement.run_id = run.run_id;
  placement.after_preemption = after_preemption;
  placement.borrowed = !candidate.within_quota;
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
  ChargeQuota(allocations_.Add(std::move(allocation), capacity_), 1);
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
  cycle.reservation_of[pool] = static_cast<int>(cycle.decision->reservations.size());
  cycle.decision->reservations.push_back(std::move(reservation));
}

bool Placer::Release(absl::string_view run_id) {
  const uint32_t id = allocations_.Find(run_id);
  if (id == kNoAllocation) return false;
  RemoveAllocation(id);
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
