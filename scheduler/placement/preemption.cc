#include "scheduler/placement/preemption.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <tuple>
#include <utility>

namespace tessera::scheduler {

bool VictimCost::Better(const VictimCost& other) const {
  // Lower units, lower priority, newer oldest victim, fewer victims.
  return std::make_tuple(units, max_priority, -oldest_start, victims) <
         std::make_tuple(other.units, other.max_priority, -other.oldest_start, other.victims);
}

namespace {

// Deep searches on nodes with many small victims stop after this many steps and keep the best
// set found (the first path of the search always yields a feasible set when one exists).
constexpr int kSearchBudget = 20000;

struct Item {
  uint32_t allocation;
  int bits;  // units it holds on this node
  int units;
  int priority;
  int64_t start;
};

// The cheapest victims that give one node `per_node` free units.
class NodeFixer {
 public:
  NodeFixer(const CapacityIndex& capacity, const Allocations& allocations, Priority priority,
            int per_node, const ReclaimRule* reclaim)
      : capacity_(capacity),
        allocations_(allocations),
        priority_(static_cast<int>(priority)),
        // Reclaimable victims may have any priority: the bounds count every preemptible one.
        bound_priority_(reclaim != nullptr ? kPriorityLevels : priority_),
        per_node_(per_node),
        reclaim_(reclaim) {}

  // Computes the fix for `node`, counting the `chosen` victims as already evicted. With a
  // `bound`, succeeds only when the fix is strictly better than it. On success fills `cost` and
  // appends the victims to `victims`.
  bool Fix(uint32_t node, const std::vector<uint32_t>& chosen, const VictimCost* bound,
           VictimCost* cost, std::vector<uint32_t>* victims) {
    if (chosen.empty() && capacity_.FreeCount(node) < per_node_ && !MayBeat(node, bound)) {
      return false;
    }
    uint64_t free_mask = capacity_.FreeMask(node);
    items_.clear();
    int eligible_bits = 0;
    int min_priority = INT_MAX;
    int64_t newest = INT64_MIN;
    for (const Allocations::Use& use : allocations_.OnNode(node)) {
      if (std::find(chosen.begin(), chosen.end(), use.allocation) != chosen.end()) {
        free_mask |= use.mask;
        continue;
      }
      const Allocation& allocation = allocations_.Get(use.allocation);
      const int priority = static_cast<int>(allocation.priority);
      const bool by_priority = allocation.preemptible && priority < priority_;
      if (!by_priority && (reclaim_ == nullptr || !reclaim_->Reclaimable(allocation))) continue;
      const int bits = std::popcount(use.mask);
      items_.push_back(
          Item{use.allocation, bits, allocation.units, priority, allocation.started_at_micros});
      eligible_bits += bits;
      min_priority = std::min(min_priority, priority);
      newest = std::max(newest, allocation.started_at_micros);
    }
    const int free = std::popcount(free_mask);
    if (free >= per_node_) {
      *cost = VictimCost{};
      return bound == nullptr || cost->Better(*bound);
    }
    deficit_ = per_node_ - free;
    if (eligible_bits < deficit_) return false;
    // No set can cost less than this: at least deficit_ units, a priority of at least the lowest
    // eligible one, an oldest victim no newer than the newest eligible one.
    const VictimCost lower_bound{deficit_, min_priority, newest, 1};
    if (bound != nullptr && !lower_bound.Better(*bound)) return false;

    std::sort(items_.begin(), items_.end(), [](const Item& a, const Item& b) {
      return std::make_tuple(a.units, a.priority, -a.start, a.allocation) <
             std::make_tuple(b.units, b.priority, -b.start, b.allocation);
    });
    suffix_bits_.assign(items_.size() + 1, 0);
    for (size_t i = items_.size(); i-- > 0;) suffix_bits_[i] = suffix_bits_[i + 1] + items_[i].bits;
    found_ = false;
    best_ = bound != nullptr ? *bound : VictimCost{INT_MAX, INT_MAX, INT64_MIN, INT_MAX};
    steps_ = 0;
    current_.clear();
    Search(0, 0, VictimCost{});
    if (!found_) return false;
    *cost = best_;
    for (size_t i : best_set_) victims->push_back(items_[i].allocation);
    return true;
  }

 private:
  // From the node's summary alone (without visiting its runs): whether enough units are
  // preemptible, and whether the cheapest conceivable set could beat `bound`.
  bool MayBeat(uint32_t node, const VictimCost* bound) const {
    const Allocations::Preemptible& summary = allocations_.PreemptibleOn(node);
    int eligible = 0;
    int min_priority = INT_MAX;
    int64_t newest = INT64_MIN;
    for (int p = 1; p < bound_priority_; ++p) {
      if (summary.units[p] == 0) continue;
      eligible += summary.units[p];
      min_priority = std::min(min_priority, p);
      newest = std::max(newest, summary.newest[p]);
    }
    const int deficit = per_node_ - capacity_.FreeCount(node);
    if (eligible < deficit) return false;
    return bound == nullptr || VictimCost{deficit, min_priority, newest, 1}.Better(*bound);
  }

  void Search(size_t i, int freed, const VictimCost& cost) {
    if (freed >= deficit_) {
      if (cost.Better(best_)) {
        best_ = cost;
        best_set_ = current_;
        found_ = true;
      }
      return;
    }
    if (i == items_.size() || freed + suffix_bits_[i] < deficit_) return;
    if (++steps_ > kSearchBudget && found_) return;
    const Item& item = items_[i];
    // Adding a victim only makes a set costlier, so a partial set that is not better than the
    // best complete one cannot lead to a better one.
    VictimCost with = cost;
    with.units += item.units;
    with.max_priority = std::max(with.max_priority, item.priority);
    with.oldest_start = std::min(with.oldest_start, item.start);
    with.victims += 1;
    if (with.Better(best_)) {
      current_.push_back(i);
      Search(i + 1, freed + item.bits, with);
      current_.pop_back();
    }
    Search(i + 1, freed, cost);
  }

  const CapacityIndex& capacity_;
  const Allocations& allocations_;
  const int priority_;
  const int bound_priority_;
  const int per_node_;
  const ReclaimRule* reclaim_;
  std::vector<Item> items_;
  std::vector<int> suffix_bits_;
  std::vector<size_t> current_;
  std::vector<size_t> best_set_;
  VictimCost best_;
  int deficit_ = 0;
  int steps_ = 0;
  bool found_ = false;
};

// The priority below which allocations may be victims, for the bounds: every priority when
// borrowed GPUs may be reclaimed.
Priority BoundPriority(const VictimRequest& request) {
  return request.reclaim != nullptr ? static_cast<Priority>(kPriorityLevels) : request.priority;
}

struct Scored {
  VictimCost cost;
  uint32_t node;
};

// Whether `a` is preferable to `b` (max-heaps of Scored keep the worst on top).
bool Preferable(const Scored& a, const Scored& b) {
  if (a.cost.Better(b.cost)) return true;
  if (b.cost.Better(a.cost)) return false;
  return a.node < b.node;
}

// The cheapest set conceivable in the pool for a node with `free` units free: `deficit` units,
// all of the lowest preemptible priority present, the newest of them. Nothing on such a node, or
// on one with fewer units free, can be strictly cheaper.
VictimCost PoolFloor(int deficit, int lowest_priority, int64_t newest) {
  return VictimCost{deficit, lowest_priority, newest, 1};
}

bool FindForOneNode(const CapacityIndex& capacity, const Allocations& allocations, NodeFixer& fixer,
                    const VictimRequest& request, std::vector<uint32_t>* victims) {
  const CapacityIndex::Pool& pool = capacity.pool(request.pool);
  int lowest = 0;
  int64_t newest = 0;
  if (!allocations.LowestPreemptibleInPool(request.pool, BoundPriority(request), &lowest,
                                           &newest)) {
    return false;
  }
  bool found = false;
  VictimCost best;
  std::vector<uint32_t> best_victims;
  std::vector<uint32_t> scratch;
  const std::vector<uint32_t> none;
  // Nodes with more free units first: they need fewer units preempted.
  for (int free = std::min(request.per_node - 1, pool.capacity); free >= 0; --free) {
    const VictimCost floor = PoolFloor(request.per_node - free, lowest, newest);
    if (found && !floor.Better(best)) break;
    const IndexSet& bucket = capacity.AvailableWithFree(request.pool, free);
    for (uint32_t offset = bucket.First(); offset != IndexSet::kNone;
         offset = bucket.Next(offset + 1)) {
      scratch.clear();
      VictimCost cost;
      if (fixer.Fix(pool.first_node + offset, none, found ? &best : nullptr, &cost, &scratch)) {
        found = true;
        best = cost;
        best_victims.swap(scratch);
        if (!floor.Better(best)) break;  // as cheap as anything can be
      }
    }
  }
  if (!found) return false;
  victims->insert(victims->end(), best_victims.begin(), best_victims.end());
  return true;
}

bool FindForNodes(const CapacityIndex& capacity, const Allocations& allocations, NodeFixer& fixer,
                  const VictimRequest& request, std::vector<uint32_t>* victims) {
  const CapacityIndex::Pool& pool = capacity.pool(request.pool);
  int lowest = 0;
  int64_t newest = 0;
  if (!allocations.LowestPreemptibleInPool(request.pool, BoundPriority(request), &lowest,
                                           &newest)) {
    return false;
  }
  const auto wanted = static_cast<size_t>(request.nodes);
  std::vector<Scored> heap;  // the `wanted` cheapest nodes to clear, the costliest on top
  std::vector<uint32_t> scratch;
  const std::vector<uint32_t> none;
  for (int free = pool.capacity; free >= 0; --free) {
    const VictimCost floor = free >= request.per_node
                                 ? VictimCost{}
                                 : PoolFloor(request.per_node - free, lowest, newest);
    if (heap.size() == wanted && !floor.Better(heap.front().cost)) break;
    const IndexSet& bucket = capacity.AvailableWithFree(request.pool, free);
    for (uint32_t offset = bucket.First(); offset != IndexSet::kNone;
         offset = bucket.Next(offset + 1)) {
      if (heap.size() == wanted && !floor.Better(heap.front().cost)) break;
      const uint32_t node = pool.first_node + offset;
      scratch.clear();
      VictimCost cost;
      const VictimCost* bound = heap.size() == wanted ? &heap.front().cost : nullptr;
      if (!fixer.Fix(node, none, bound, &cost, &scratch)) continue;
      heap.push_back(Scored{cost, node});
      std::push_heap(heap.begin(), heap.end(), Preferable);
      if (heap.size() > wanted) {
        std::pop_heap(heap.begin(), heap.end(), Preferable);
        heap.pop_back();
      }
    }
  }
  if (heap.size() < wanted) return false;
  std::sort(heap.begin(), heap.end(), Preferable);
  // Clear the chosen nodes in order; victims already chosen for an earlier node are free here.
  std::vector<uint32_t> chosen;
  for (const Scored& scored : heap) {
    VictimCost cost;
    if (!fixer.Fix(scored.node, chosen, nullptr, &cost, &chosen)) return false;
  }
  victims->insert(victims->end(), chosen.begin(), chosen.end());
  return true;
}

}  // namespace

bool FindVictims(const CapacityIndex& capacity, const Allocations& allocations,
                 const VictimRequest& request, std::vector<uint32_t>* victims) {
  if (request.nodes < 1 || request.per_node < 1) return false;
  NodeFixer fixer(capacity, allocations, request.priority, request.per_node, request.reclaim);
  if (request.explicit_nodes != nullptr && !request.explicit_nodes->empty()) {
    std::vector<uint32_t> chosen;
    for (uint32_t node : *request.explicit_nodes) {
      if (!capacity.Available(node)) return false;
      VictimCost cost;
      if (!fixer.Fix(node, chosen, nullptr, &cost, &chosen)) return false;
    }
    victims->insert(victims->end(), chosen.begin(), chosen.end());
    return true;
  }
  if (request.nodes == 1) return FindForOneNode(capacity, allocations, fixer, request, victims);
  return FindForNodes(capacity, allocations, fixer, request, victims);
}

}  // namespace tessera::scheduler
