#pragma once
// Runs the scheduler's cycle while this instance leads the scheduler role: one cycle at once,
// then one every `interval` of the injected clock (a PeriodicRunner; sooner when a node's lease
// ends before then, so that a dead node is declared lost at its lease's end), each asking the
// election first, which also confirms the hold before its deadline. Standbys ask on the same beat,
// so one takes over within an interval of the leader's session ending.
//
// The first beat is taken before the constructor returns, so a server built with a runner knows
// whether it leads before it serves: a sole instance accepts its first workers' streams, instead
// of refusing them as a standby until its runner's thread had its first turn.

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "base/clock.h"
#include "scheduler/service/lease_table.h"
#include "scheduler/service/scheduling_cycle.h"
#include "services/common/leader_election.h"
#include "transport/periodic_runner.h"

namespace tessera::scheduler {

class SchedulerRunner {
 public:
  // `election` is for the scheduler role (store::kSchedulerLeaderRole).
  // `leases` (may be null) wakes the cycle at the next lease's end when that comes before
  // `interval`: a dead node is declared lost at its lease's end, not up to an interval later.
  SchedulerRunner(std::shared_ptr<SchedulingCycle> cycle, std::shared_ptr<LeaderElection> election,
                  std::shared_ptr<Clock> clock, absl::Duration interval,
                  std::shared_ptr<const LeaseTable> leases = nullptr);
  // Stops the cycles (one in progress finishes); the election gives the role up when its last
  // user goes.

  bool is_leader() const { return election_->IsLeader(); }

 private:
  void Tick();

  std::shared_ptr<SchedulingCycle> cycle_;
  std::shared_ptr<LeaderElection> election_;
  int64_t term_ = 0;         // the runner's thread only: the term whose cycles run
  absl::Status last_error_;  // the runner's thread only
  // Last: started once everything it uses is built and the first beat was taken.
  std::optional<PeriodicRunner> runner_;
};

}  // namespace tessera::scheduler
