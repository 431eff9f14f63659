#include "scheduler/placement/allocations.h"

#include <algorithm>
#include <bit>

namespace tessera::scheduler {

uint32_t Allocations::Add(Allocation allocation, CapacityIndex& capacity) {
  allocation.units = 0;
  for (auto& [node, mask] : allocation.parts) {
    const uint64_t free = capacity.FreeMask(node);
    mask &= free;  // a unit held twice (inconsistent input) stays with its first holder
    capacity.SetFreeMask(node, free & ~mask);
    allocation.units += std::popcount(mask);
  }
  uint32_t id;
  if (free_ids_.empty()) {
    id = static_cast<uint32_t>(allocations_.size());
    allocations_.push_back(std::move(allocation));
  } else {
    id = free_ids_.back();
    free_ids_.pop_back();
    allocations_[id] = std::move(allocation);
  }
  const Allocation& stored = allocations_[id];
  const int priority = static_cast<int>(stored.priority);
  for (const auto& [node, mask] : stored.parts) {
    on_node_[node].push_back(Use{id, mask});
    if (stored.preemptible) {
      Preemptible& summary = preemptible_on_[node];
      if (summary.units[priority] == 0 || stored.started_at_micros > summary.newest[priority]) {
        summary.newest[priority] = stored.started_at_micros;
      }
      summary.units[priority] = static_cast<uint8_t>(summary.units[priority] + std::popcount(mask));
    }
  }
  if (stored.preemptible) {
    ++preemptible_[priority];
    CountInPools(stored, capacity, 1);
  }
  by_run_[stored.run_id] = id;
  return id;
}

void Allocations::Remove(uint32_t id, CapacityIndex& capacity) {
  Allocation& allocation = allocations_[id];
  const int priority = static_cast<int>(allocation.priority);
  for (const auto& [node, mask] : allocation.parts) {
    capacity.SetFreeMask(node, capacity.FreeMask(node) | mask);
    std::vector<Use>& uses = on_node_[node];
    uses.erase(std::find_if(uses.begin(), uses.end(),
                            [id](const Use& use) { return use.allocation == id; }));
    if (allocation.preemptible) {
      Preemptible& summary = preemptible_on_[node];
      summary.units[priority] = static_cast<uint8_t>(summary.units[priority] - std::popcount(mask));
      if (allocation.started_at_micros >= summary.newest[priority]) RecomputeNewest(node, priority);
    }
  }
  if (allocation.preemptible) {
    --preemptible_[priority];
    CountInPools(allocation, capacity, -1);
  }
  by_run_.erase(allocation.run_id);
  allocation = Allocation{};
  free_ids_.push_back(id);
}

void Allocations::CountInPools(const Allocation& allocation, const CapacityIndex& capacity,
                               int delta) {
  if (pool_starts_.size() < capacity.pool_count()) pool_starts_.resize(capacity.pool_count());
  // The pools its parts touch, each once (a placement's nodes are all in one pool; a snapshot's
  // allocation may not be).
  std::vector<uint32_t> pools;
  for (const auto& [node, mask] : allocation.parts) pools.push_back(capacity.PoolOf(node));
  std::sort(pools.begin(), pools.end());
  pools.erase(std::unique(pools.begin(), pools.end()), pools.end());
  for (uint32_t pool : pools) {
    std::map<int64_t, int>& starts = pool_starts_[pool][static_cast<int>(allocation.priority)];
    auto [it, inserted] = starts.try_emplace(allocation.started_at_micros, 0);
    it->second += delta;
    if (it->second == 0) starts.erase(it);
  }
}

bool Allocations::LowestPreemptibleInPool(uint32_t pool, Priority below, int* priority,
                                          int64_t* newest) const {
  if (pool >= pool_starts_.size()) return false;
  for (int p = 1; p < static_cast<int>(below); ++p) {
    const std::map<int64_t, int>& starts = pool_starts_[pool][p];
    if (starts.empty()) continue;
    *priority = p;
    *newest = starts.rbegin()->first;
    return true;
  }
  return false;
}

void Allocations::RecomputeNewest(uint32_t node, int priority) {
  Preemptible& summary = preemptible_on_[node];
  summary.newest[priority] = 0;
  bool any = false;
  for (const Use& use : on_node_[node]) {
    const Allocation& other = allocations_[use.allocation];
    if (!other.preemptible || static_cast<int>(other.priority) != priority) continue;
    if (!any || other.started_at_micros > summary.newest[priority]) {
      summary.newest[priority] = other.started_at_micros;
    }
    any = true;
  }
}

}  // namespace tessera::scheduler
