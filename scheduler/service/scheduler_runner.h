#pragma once
// Runs the scheduler's cycle on its own thread while this instance holds the leader lock.

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "scheduler/service/leader_lock.h"
#include "scheduler/service/scheduler_core.h"

namespace tessera::scheduler {

class SchedulerRunner {
 public:
  SchedulerRunner(std::shared_ptr<SchedulerCore> core, std::unique_ptr<LeaderLock> lock,
                  absl::Duration interval);
  ~SchedulerRunner();  // stops the thread

  bool is_leader() const { return leader_.load(); }

 private:
  void Loop();
  std::shared_ptr<SchedulerCore> core_;
  std::unique_ptr<LeaderLock> lock_;
  const absl::Duration interval_;
  std::atomic<bool> leader_{false};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace tessera::scheduler
