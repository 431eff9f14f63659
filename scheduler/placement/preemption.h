#pragma once
// Choosing which runs to preempt so that a higher-priority run fits.
//
// A victim is a preemptible allocation of strictly lower priority than the run that needs room,
// or, for a run within its team's quota, a preemptible allocation of another team that holds
// more than its quota (borrowed GPUs are reclaimed whatever the priorities); non-preemptible
// runs are never chosen. Victim sets are
// compared by, in order: fewest units (GPUs) preempted in total (a multi-node victim costs all
// of its GPUs), lowest priority among the victims, newest oldest victim (the least work lost),
// fewest victims; then the lowest node id, for determinism.
//
// For a one-node request the choice is exact: the cheapest set over every available node of the
// pool (nodes are visited by how much they already have free, and skipped when a bound shows they
// cannot beat the best so far). For several nodes it is greedy: the nodes that are cheapest to
// clear one by one, with a victim shared by two chosen nodes counted once.

#include <cstdint>
#include <vector>

#include "scheduler/placement/allocations.h"
#include "scheduler/placement/capacity_index.h"
#include "scheduler/placement/quota_ledger.h"

namespace tessera::scheduler {

struct VictimCost {
  int units = 0;
  int max_priority = 0;
  int64_t oldest_start = INT64_MAX;
  int victims = 0;

  // Whether this set is strictly preferable to `other`.
  bool Better(const VictimCost& other) const;
};

// Borrowed GPUs a run within its team's quota may take back: preemptible allocations of other
// teams over their quota in the pool.
struct ReclaimRule {
  const QuotaLedger* ledger = nullptr;
  absl::string_view team;  // the claimant's
  uint32_t pool = 0;

  bool Reclaimable(const Allocation& allocation) const {
    return allocation.preemptible && allocation.team != team &&
           ledger->OverQuota(allocation.team, pool);
  }
};

struct VictimRequest {
  uint32_t pool = 0;
  int per_node = 0;
  int nodes = 0;
  Priority priority = Priority::kMedium;
  // The run's explicit nodes (node_names), or empty for any available node of the pool.
  const std::vector<uint32_t>* explicit_nodes = nullptr;
  // Set when borrowed GPUs may be reclaimed too.
  const ReclaimRule* reclaim = nullptr;
};

// Fills `victims` (allocation ids) and returns true when evicting them leaves enough available
// nodes with per_node free units; returns false when no eligible set exists.
bool FindVictims(const CapacityIndex& capacity, const Allocations& allocations,
                 const VictimRequest& request, std::vector<uint32_t>* victims);

}  // namespace tessera::scheduler
