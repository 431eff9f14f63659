#pragma once
// When the health API sweeps without being asked: the idle nodes on a schedule, a run's nodes
// when the run watch sees its MFU fall or a straggler (run_watch.h), and a node drained on a
// deferred verdict once nothing runs on it (deferred_verdicts.h). Each is periodic work, done at
// most once per its interval by Tick. A straggler's run is also moved off it
// (straggler_moves.h).

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "healthcheck/deferred_verdicts.h"
#include "healthcheck/health_clients.h"
#include "healthcheck/run_watch.h"
#include "healthcheck/straggler_moves.h"
#include "healthcheck/sweep_launcher.h"
#include "tessera/v1/health.pb.h"

namespace tessera::health {

struct SweepTriggerConfig {
  RunWatchConfig watch;
  // Sweeps of the idle nodes on a schedule; zero: none.
  absl::Duration sweep_interval = absl::ZeroDuration();
  absl::Duration run_watch_interval = absl::Seconds(1);
  // How often the nodes drained on a deferred verdict are looked at (a list of every node):
  // those idle now are swept again.
  absl::Duration remeasure_interval = absl::Seconds(10);
  // Idle nodes added to a run-triggered sweep, for peers to compare with.
  int max_peers = 8;
  // Moving a straggler's run off it at once (straggler_moves.h).
  StragglerMoveConfig moves;
};

class SweepTriggers {
 public:
  SweepTriggers(std::shared_ptr<SchedulerApi> scheduler, std::shared_ptr<RunsApi> runs,
                std::shared_ptr<SweepLauncher> launcher, std::shared_ptr<DeferredVerdicts> deferred,
                std::shared_ptr<StragglerMoves> moves, std::shared_ptr<Clock> clock,
                SweepTriggerConfig config)
      : scheduler_(std::move(scheduler)),
        runs_(std::move(runs)),
        launcher_(std::move(launcher)),
        deferred_(std::move(deferred)),
        moves_(std::move(moves)),
        clock_(std::move(clock)),
        config_(config),
        watch_(config_.watch) {}

  // Starts the sweeps that are due. `sweeps`: the newest sweeps as this tick read them (a drained
  // node one of them is measuring is not swept again; unreadable: no drained node is).
  void Tick(const absl::StatusOr<std::vector<v1::Sweep>>& sweeps);

 private:
  // Whether the periodic work whose next time is `next` is due now; if so, it is next due
  // `every` from now.
  bool Due(absl::Time& next, absl::Duration every);
  void ScheduleSweeps();
  // `sweeps`: the newest sweeps (a run with one running gets no other; unreadable: it does).
  void WatchRuns(const absl::StatusOr<std::vector<v1::Sweep>>& sweeps);
  // A running sweep for `t`'s run that measures its suspect (any, for a trigger without one).
  static absl::StatusOr<v1::Sweep> RunningSweepFor(
      const absl::StatusOr<std::vector<v1::Sweep>>& sweeps, const SweepTriggerEvent& t);
  void RemeasureDrained(const std::vector<v1::Sweep>& sweeps);

  std::shared_ptr<SchedulerApi> scheduler_;
  std::shared_ptr<RunsApi> runs_;
  std::shared_ptr<SweepLauncher> launcher_;
  std::shared_ptr<DeferredVerdicts> deferred_;
  std::shared_ptr<StragglerMoves> moves_;
  std::shared_ptr<Clock> clock_;
  const SweepTriggerConfig config_;

  absl::Mutex mu_;
  RunWatch watch_ ABSL_GUARDED_BY(mu_);
  absl::Time next_watch_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_scheduled_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_remeasure_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace tessera::health
