#include "scheduler/service/scheduler_runner.h"

#include <spdlog/spdlog.h>

namespace tessera::scheduler {

SchedulerRunner::SchedulerRunner(std::shared_ptr<SchedulingCycle> cycle,
                                 std::shared_ptr<store::LeaderLockStore> locks,
                                 std::string instance, absl::Duration interval)
    : cycle_(std::move(cycle)), lock_(std::move(locks), std::move(instance)), interval_(interval) {
  thread_ = std::thread([this] { Loop(); });
}

SchedulerRunner::~SchedulerRunner() {
  stop_.Notify();
  thread_.join();
}

void SchedulerRunner::Loop() {
  absl::Status last_error;
  // The first cycle runs at once; then one per interval.
  for (bool first = true; first || !stop_.WaitForNotificationWithTimeout(interval_);
       first = false) {
    const bool lead = lock_.Lead();
    leader_.store(lead);
    if (!lead) continue;
    auto stats = cycle_->RunCycle();
    if (!stats.ok()) {
      // Log a failure once, not every cycle while the database is down.
      if (stats.status() != last_error) {
        spdlog::warn("scheduling cycle failed: {}", stats.status().ToString());
      }
      last_error = stats.status();
    } else {
      last_error = absl::OkStatus();
    }
  }
}

}  // namespace tessera::scheduler
