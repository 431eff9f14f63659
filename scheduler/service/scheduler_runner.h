#pragma once
// Runs the scheduler's cycle on its own thread while this instance holds the scheduler's leader
// lock.

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "scheduler/service/leader_lock.h"
#include "scheduler/service/scheduling_cycle.h"
#include "services/store/leader_lock_store.h"

namespace tessera::scheduler {

class SchedulerRunner {
 public:
  // `locks` elects the leader among scheduler instances; `instance` names this one and must be
  // unique among them (host:pid). Null `locks`: this instance always leads (a single instance
  // without a database).
  SchedulerRunner(std::shared_ptr<SchedulingCycle> cycle,
                  std::shared_ptr<store::LeaderLockStore> locks, std::string instance,
                  absl::Duration interval);
  ~SchedulerRunner();  // stops the thread, then gives the leadership up

  bool is_leader() const { return leader_.load(); }

 private:
  void Loop();
  std::shared_ptr<SchedulingCycle> cycle_;
  LeaderLock lock_;  // used by the thread only
  const absl::Duration interval_;
  std::atomic<bool> leader_{false};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace tessera::scheduler
