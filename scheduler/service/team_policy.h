#pragma once
// The teams' quotas as the scheduler uses them: read from the team store at most every
// `refresh` (teams change rarely; the cycle runs every 200 ms), the last good read kept while
// the store cannot be read. Without a team store, no quotas (every cluster unmanaged).

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "scheduler/placement/fair_share.h"
#include "scheduler/placement/types.h"
#include "services/store/team_store.h"
#include "services/store/usage_store.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::scheduler {

// Fair share re-reads usage this often, over this many half-lives.
inline constexpr absl::Duration kUsageRefresh = absl::Seconds(60);
inline constexpr int kUsageHalfLives = 5;

class TeamPolicy {
 public:
  // `usage` (null: every owner ranks alike) is read for fair share every kUsageRefresh.
  TeamPolicy(std::shared_ptr<store::TeamStore> teams, std::shared_ptr<Clock> clock,
             absl::Duration refresh = absl::Seconds(5),
             std::shared_ptr<store::UsageStore> usage = nullptr,
             absl::Duration half_life = absl::Hours(24 * 7));

  std::vector<TeamQuota> Quotas();
  // Sets each queued run's fair-share rank (fair_share.h) from its team and owner; `runs[i]` is
  // the run `queue[i]` was made from.
  void AssignShareRanks(const std::vector<const v1::Run*>& runs, std::vector<QueuedRun>& queue);
  // The user's team now ("" when none, or no team store); for the fit check at submit.
  absl::StatusOr<std::string> TeamOfUser(const std::string& user);

 private:
  void Refresh() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RefreshUsage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<store::TeamStore> teams_;
  std::shared_ptr<Clock> clock_;
  const absl::Duration refresh_;
  absl::Mutex mu_;
  absl::Time read_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::vector<v1::Team> cached_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<store::UsageStore> usage_;
  const absl::Duration half_life_;
  absl::Time usage_read_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::unique_ptr<FairShare> share_ ABSL_GUARDED_BY(mu_);  // null until usage was read
};

}  // namespace tessera::scheduler
