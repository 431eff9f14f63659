#pragma once
// Runs the scheduler's cycle while this instance holds the scheduler's leader lock: one cycle at
// once, then one every `interval` of the injected clock (a PeriodicRunner), each asking the lock
// first. Standbys ask the lock on the same beat, so one takes over within an interval of the
// leader's session ending.

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "base/clock.h"
#include "scheduler/service/leader_lock.h"
#include "scheduler/service/scheduling_cycle.h"
#include "services/common/periodic_runner.h"
#include "services/store/leader_lock_store.h"

namespace tessera::scheduler {

class SchedulerRunner {
 public:
  // `locks` elects the leader among scheduler instances; `instance` names this one and must be
  // unique among them (host:pid). Null `locks`: this instance always leads (a single instance
  // without a database).
  SchedulerRunner(std::shared_ptr<SchedulingCycle> cycle,
                  std::shared_ptr<store::LeaderLockStore> locks, std::string instance,
                  std::shared_ptr<Clock> clock, absl::Duration interval);
  // Stops the cycles (one in progress finishes), then gives the leadership up: members are
  // destroyed in reverse order, the runner before the lock.

  bool is_leader() const { return leader_.load(); }

 private:
  void Tick();

  std::shared_ptr<SchedulingCycle> cycle_;
  LeaderLock lock_;  // used by the runner's thread only
  std::atomic<bool> leader_{false};
  absl::Status last_error_;  // the runner's thread only
  PeriodicRunner runner_;    // last: started once everything it uses is built
};

}  // namespace tessera::scheduler
