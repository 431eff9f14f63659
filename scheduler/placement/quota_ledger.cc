#include "scheduler/placement/quota_ledger.h"

#include <algorithm>

namespace tessera::scheduler {

QuotaLedger::QuotaLedger(const std::vector<TeamQuota>& quotas, const CapacityIndex& capacity)
    : capacity_(capacity) {
  absl::flat_hash_set<std::string> managed;
  for (const TeamQuota& quota : quotas) {
    // One entry per (team, cluster, GPU type): a repeated quota keeps the last.
    bool replaced = false;
    for (uint32_t id : by_team_[quota.team]) {
      Entry& entry = entries_[id];
      if (entry.cluster == quota.cluster && entry.gpu_type == quota.gpu_type) {
        entry.gpus = std::max(0, quota.gpus);
        replaced = true;
      }
    }
    if (!replaced) {
      by_team_[quota.team].push_back(static_cast<uint32_t>(entries_.size()));
      entries_.push_back(Entry{quota.cluster, quota.gpu_type, std::max(0, quota.gpus), 0});
    }
    managed.insert(quota.cluster);
  }
  managed_pool_.resize(capacity.pool_count());
  counted_pool_.resize(capacity.pool_count());
  for (uint32_t pool = 0; pool < capacity.pool_count(); ++pool) {
    managed_pool_[pool] = managed.contains(capacity.pool(pool).cluster);
    counted_pool_[pool] = managed_pool_[pool] && capacity.pool(pool).gpus_per_node > 0;
    any_managed_ = any_managed_ || managed_pool_[pool];
  }
}

std::vector<uint32_t>& QuotaLedger::Applicable(absl::string_view team, uint32_t pool) const {
  auto [it, inserted] = applicable_.try_emplace(team);
  if (inserted) it->second.resize(capacity_.pool_count());
  std::vector<uint32_t>& ids = it->second[pool];
  if (!ids.empty() || !managed_pool_[pool]) return ids;
  const CapacityIndex::Pool& p = capacity_.pool(pool);
  std::vector<uint32_t>& team_entries = by_team_[team];
  for (uint32_t id : team_entries) {
    const Entry& entry = entries_[id];
    if (entry.cluster == p.cluster && (entry.gpu_type.empty() || entry.gpu_type == p.gpu_type)) {
      ids.push_back(id);
    }
  }
  if (ids.empty()) {
    // No quota applies: an implicit one of 0 GPUs of this type. Every other pool of this
    // cluster and type finds it above; pools of other types are not limited by it.
    ids.push_back(static_cast<uint32_t>(entries_.size()));
    team_entries.push_back(ids.back());
    entries_.push_back(Entry{p.cluster, p.gpu_type, 0, 0});
  }
  return ids;
}

int QuotaLedger::Headroom(absl::string_view team, uint32_t pool) const {
  if (!managed_pool_[pool]) return kUnlimited;
  int headroom = kUnlimited;
  for (uint32_t id : Applicable(team, pool)) {
    headroom = std::min(headroom, entries_[id].gpus - entries_[id].used);
  }
  return headroom;
}

void QuotaLedger::Tightest(absl::string_view team, uint32_t pool, int* used, int* quota) const {
  *used = 0;
  *quota = 0;
  if (!managed_pool_[pool]) return;
  int best = kUnlimited;
  for (uint32_t id : Applicable(team, pool)) {
    const Entry& entry = entries_[id];
    if (entry.gpus - entry.used < best) {
      best = entry.gpus - entry.used;
      *used = entry.used;
      *quota = entry.gpus;
    }
  }
}

void QuotaLedger::Charge(absl::string_view team, uint32_t pool, int units, int delta) {
  if (!counted_pool_[pool] || units == 0) return;
  for (uint32_t id : Applicable(team, pool)) {
    Entry& entry = entries_[id];
    const bool was_over = entry.used > entry.gpus;
    entry.used += delta * units;
    const bool is_over = entry.used > entry.gpus;
    over_quota_ += static_cast<int>(is_over) - static_cast<int>(was_over);
  }
}

}  // namespace tessera::scheduler
