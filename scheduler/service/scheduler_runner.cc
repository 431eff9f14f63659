#include "scheduler/service/scheduler_runner.h"

#include <spdlog/spdlog.h>

namespace tessera::scheduler {

SchedulerRunner::SchedulerRunner(std::shared_ptr<SchedulingCycle> cycle,
                                 std::shared_ptr<LeaderElection> election,
                                 std::shared_ptr<Clock> clock, absl::Duration interval,
                                 std::shared_ptr<const LeaseTable> leases)
    : cycle_(std::move(cycle)), election_(std::move(election)) {
  // Whether this instance leads is known before anyone can connect to it (see the header). The
  // runner's first run confirms the hold at once and runs the cycle.
  election_->Lead();
  runner_.emplace(
      std::move(clock), interval, [this] { Tick(); }, PeriodicRunner::FirstRun::kAtOnce,
      [leases = std::move(leases)] {
        return leases ? leases->UntilNextExpiry() : absl::InfiniteDuration();
      });
}

void SchedulerRunner::Tick() {
  if (!election_->Lead()) {
    // A follower's view of the cluster is none: what it published as leader goes stale.
    if (term_ != 0) cycle_->EndTerm();
    term_ = 0;
    return;
  }
  if (const int64_t term = election_->epoch(); term != term_) {
    term_ = term;
    cycle_->BeginTerm();
  }
  auto stats = cycle_->RunCycle();
  const absl::Status st = stats.status();
  // Log a failure once, not every cycle while the database is down.
  if (!st.ok() && st != last_error_) spdlog::warn("scheduling cycle failed: {}", st.ToString());
  last_error_ = st;
}

}  // namespace tessera::scheduler
