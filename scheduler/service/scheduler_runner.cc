#include "scheduler/service/scheduler_runner.h"

#include <spdlog/spdlog.h>

namespace tessera::scheduler {

SchedulerRunner::SchedulerRunner(std::shared_ptr<SchedulingCycle> cycle,
                                 std::shared_ptr<store::LeaderLockStore> locks,
                                 std::string instance, std::shared_ptr<Clock> clock,
                                 absl::Duration interval)
    : cycle_(std::move(cycle)),
      lock_(std::move(locks), std::move(instance)),
      runner_(
          std::move(clock), interval, [this] { Tick(); }, PeriodicRunner::FirstRun::kAtOnce) {}

void SchedulerRunner::Tick() {
  const bool lead = lock_.Lead();
  leader_.store(lead);
  if (!lead) return;
  auto stats = cycle_->RunCycle();
  const absl::Status st = stats.status();
  // Log a failure once, not every cycle while the database is down.
  if (!st.ok() && st != last_error_) spdlog::warn("scheduling cycle failed: {}", st.ToString());
  last_error_ = st;
}

}  // namespace tessera::scheduler
