#pragma once
// Teams' quotas and what each team holds against them, kept in step with the allocations.
//
// A quota applies to a pool when it names the pool's cluster and either names no GPU type or
// the pool's. A team's headroom in a pool is the least, over its quotas that apply, of the quota
// minus the GPUs it holds in that quota's scope. In a managed cluster (one some quota names) a
// team without a quota that applies to a pool has a quota of 0 GPUs of the pool's type: all it
// holds there is borrowed.
// Units of CPU-only pools are not counted: quotas are of GPUs.

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "scheduler/placement/capacity_index.h"
#include "scheduler/placement/types.h"

namespace tessera::scheduler {

class QuotaLedger {
 public:
  static constexpr int kUnlimited = INT_MAX;

  QuotaLedger(const std::vector<TeamQuota>& quotas, const CapacityIndex& capacity);

  // Whether the pool's cluster is managed by quotas.
  bool Managed(uint32_t pool) const { return managed_pool_[pool]; }
  bool AnyManaged() const { return any_managed_; }
  // GPUs the team may still take in the pool without borrowing (kUnlimited when unmanaged;
  // negative when it already borrows).
  int Headroom(absl::string_view team, uint32_t pool) const;
  // The quota that limits the team in the pool (the one with the least headroom): its usage
  // and size; {0, 0} when none applies.
  void Tightest(absl::string_view team, uint32_t pool, int* used, int* quota) const;
  // Whether the team holds more than one of its quotas that apply to the pool.
  bool OverQuota(absl::string_view team, uint32_t pool) const { return Headroom(team, pool) < 0; }
  // Whether any team holds more than a quota (someone borrows).
  bool AnyBorrowing() const { return over_quota_ > 0; }

  // The team took (delta > 0) or gave back (delta < 0) `units` in the pool.
  void Charge(absl::string_view team, uint32_t pool, int units, int delta);

 private:
  struct Entry {
    std::string cluster;
    std::string gpu_type;
    int gpus = 0;
    int used = 0;
  };
  // The team's entries that apply to the pool; in a managed cluster, an implicit zero quota is
  // made for a team that has none there.
  // (A cache: resolving a team's entries changes nothing the class promises.)
  std::vector<uint32_t>& Applicable(absl::string_view team, uint32_t pool) const;

  const CapacityIndex& capacity_;
  mutable std::vector<Entry> entries_;
  mutable absl::flat_hash_map<std::string, std::vector<uint32_t>> by_team_;
  // [team] -> [pool] -> entries that apply, filled on first use.
  mutable absl::flat_hash_map<std::string, std::vector<std::vector<uint32_t>>> applicable_;
  std::vector<bool> managed_pool_;
  std::vector<bool> counted_pool_;  // GPU pools of managed clusters
  int over_quota_ = 0;              // entries with used > gpus
  bool any_managed_ = false;
};

}  // namespace tessera::scheduler
