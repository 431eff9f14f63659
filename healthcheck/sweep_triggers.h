#pragma once
// When the health API sweeps without being asked: the idle nodes on a schedule, a run's nodes
// when the run watch sees its MFU fall or a straggler (run_watch.h), and a node drained on a
// deferred verdict once nothing runs on it (deferred_verdicts.h). Each is periodic work, done at
// most once per its interval by Tick. A straggler's run is also moved off it at once where it
// can go on without it: a slow node slows every step of a synchronous run, and the sweep that
// judges the node takes tens of seconds.

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
  // A straggler's run is moved off it at once (its attempt ended as STRAGGLER, the node avoided
  // by the run for a while) when it can go on without it: an idle node of the straggler's pool
  // is free, or the run accepts fewer nodes. The sweep decides whether the node is cordoned.
  // False: the run stays on the node until the sweep condemns it (a sweep and its follow-up).
  bool move_off_stragglers = true;
  // A run moved off a straggler is not moved again for this long (only swept): a run that
  // looks uneven for reasons of its own pays one restart, not one every few reports.
  absl::Duration straggler_move_rest = absl::Minutes(5);
};

class SweepTriggers {
 public:
  SweepTriggers(std::shared_ptr<SchedulerApi> scheduler, std::shared_ptr<RunsApi> runs,
                std::shared_ptr<SweepLauncher> launcher, std::shared_ptr<DeferredVerdicts> deferred,
                std::shared_ptr<Clock> clock, SweepTriggerConfig config)
      : scheduler_(std::move(scheduler)),
        runs_(std::move(runs)),
        launcher_(std::move(launcher)),
        deferred_(std::move(deferred)),
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
  void WatchRuns();
  // Whether `run` may be moved off `straggler` now (SweepTriggerConfig::move_off_stragglers);
  // `busy`: the nodes running runs hold.
  bool MayMoveOff(const v1::Run& run, const std::string& straggler,
                  const std::map<std::string, v1::Node>& nodes, const std::set<std::string>& busy);
  // Ends `run`'s attempt as STRAGGLER on `t.suspect_node` (the run requeued, avoiding it).
  void MoveOff(const v1::Run& run, const SweepTriggerEvent& t,
               const absl::StatusOr<v1::Sweep>& sweep);
  void RemeasureDrained(const std::vector<v1::Sweep>& sweeps);

  std::shared_ptr<SchedulerApi> scheduler_;
  std::shared_ptr<RunsApi> runs_;
  std::shared_ptr<SweepLauncher> launcher_;
  std::shared_ptr<DeferredVerdicts> deferred_;
  std::shared_ptr<Clock> clock_;
  const SweepTriggerConfig config_;

  absl::Mutex mu_;
  RunWatch watch_ ABSL_GUARDED_BY(mu_);
  absl::Time next_watch_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_scheduled_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_remeasure_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::map<std::string, absl::Time> moved_at_ ABSL_GUARDED_BY(mu_);  // run id -> last move
};

}  // namespace tessera::health
