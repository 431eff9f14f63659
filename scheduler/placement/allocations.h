#pragma once
// The runs holding resources, by run id and by node, kept in step with the capacity index:
// adding an allocation takes its units from the nodes' free masks, removing one gives them back.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "scheduler/placement/capacity_index.h"
#include "scheduler/placement/types.h"

namespace tessera::scheduler {

inline constexpr uint32_t kNoAllocation = UINT32_MAX;

struct Allocation {
  std::string run_id;
  std::string team;
  Priority priority = Priority::kMedium;
  bool preemptible = false;
  int64_t started_at_micros = 0;
  // Whether it is a CPU-only run (its nodes' units are held but no GPU index is reported).
  bool cpu_only = false;
  int units = 0;  // units held over all its nodes: what preempting it costs
  std::vector<std::pair<uint32_t, uint64_t>> parts;  // (node, units mask), in node-rank order
};

class Allocations {
 public:
  explicit Allocations(uint32_t node_count) : on_node_(node_count), preemptible_on_(node_count) {}

  struct Use {
    uint32_t allocation;
    uint64_t mask;
  };

  // Takes the allocation's units (only those still free) from `capacity`; returns its id.
  uint32_t Add(Allocation allocation, CapacityIndex& capacity);
  // Gives the units back and forgets the allocation.
  void Remove(uint32_t id, CapacityIndex& capacity);

  uint32_t Find(absl::string_view run_id) const {
    auto it = by_run_.find(run_id);
    return it == by_run_.end() ? kNoAllocation : it->second;
  }
  const Allocation& Get(uint32_t id) const { return allocations_[id]; }
  const std::vector<Use>& OnNode(uint32_t node) const { return on_node_[node]; }
  size_t size() const { return by_run_.size(); }

  // Per node, the units held by preemptible allocations of each priority and the newest start
  // among them: what a preemption search needs to bound a node without visiting its runs.
  struct Preemptible {
    uint8_t units[kPriorityLevels] = {};
    int64_t newest[kPriorityLevels] = {};
  };
  const Preemptible& PreemptibleOn(uint32_t node) const { return preemptible_on_[node]; }

  // Over a pool: the lowest priority below `below` held by a preemptible allocation, and the
  // newest start among those of that priority; false when there are none.
  bool LowestPreemptibleInPool(uint32_t pool, Priority below, int* priority, int64_t* newest) const;

  // Whether some preemptible allocation has a priority strictly below `priority`.
  bool AnyPreemptibleBelow(Priority priority) const {
    for (int p = 1; p < static_cast<int>(priority); ++p) {
      if (preemptible_[p] > 0) return true;
    }
    return false;
  }

 private:
  std::vector<Allocation> allocations_;
  std::vector<uint32_t> free_ids_;
  absl::flat_hash_map<std::string, uint32_t> by_run_;
  void RecomputeNewest(uint32_t node, int priority);
  // Adds (+1) or removes (-1) a preemptible allocation's start in the pools it touches.
  void CountInPools(const Allocation& allocation, const CapacityIndex& capacity, int delta);

  std::vector<std::vector<Use>> on_node_;
  std::vector<Preemptible> preemptible_on_;
  // [pool][priority]: start time -> number of preemptible allocations.
  std::vector<std::array<std::map<int64_t, int>, kPriorityLevels>> pool_starts_;
  int preemptible_[kPriorityLevels] = {};
};

}  // namespace tessera::scheduler
