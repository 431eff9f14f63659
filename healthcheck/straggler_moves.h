#pragma once
// Moving a run off its straggler at once. A synchronous run goes at its slowest node's pace, and
// the sweep that judges the node takes tens of seconds (a slow verdict for speed alone needs a
// follow-up sweep), so when the run watch flags a straggler (run_watch.h) and the run can go on
// without it — an idle node of the straggler's pool is free, or the run accepts fewer nodes —
// its attempt is ended as STRAGGLER (STRAGGLER_WATCH) and it resumes from its newest checkpoint,
// keeping off the node for a while (Run.avoid_node); the sweep alone decides the node's fate.
//
// A moved run rests before it is moved again, twice as long after each further move: a run
// that only looks uneven (experts with uneven load, say) pays a restart every 1, 2, 4 ... minutes
// at most. A straggler seen during the rest is not forgotten: if the node still straggles in the
// run's newest report when the rest is over, the run is moved then.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "healthcheck/health_clients.h"
#include "healthcheck/run_watch.h"
#include "tessera/v1/nodes.pb.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::health {

struct StragglerMoveConfig {
  // False: a run stays on its straggler until a sweep condemns the node.
  bool enabled = true;
  // The rest after a run's first move, doubled with each further one (at most 32 times it),
  // until the run has not been moved for `memory`.
  absl::Duration rest = absl::Minutes(1);
  absl::Duration memory = absl::Hours(1);
};

class StragglerMoves {
 public:
  // A node whose compute time per step is `straggler_factor` times the median of the run's
  // other nodes' straggles (the run watch's factor).
  StragglerMoves(std::shared_ptr<SchedulerApi> scheduler, std::shared_ptr<Clock> clock,
                 StragglerMoveConfig config, double straggler_factor)
      : scheduler_(std::move(scheduler)),
        clock_(std::move(clock)),
        config_(config),
        straggler_factor_(straggler_factor) {}

  // The run watch flagged `t.suspect_node` of `run`; `nodes`: every node by name, `busy`: those
  // running runs hold, `sweep_id`: the sweep that judges the node ("" if none). Moves the run
  // now where it may, or once its rest is over. Returns whether it moved it.
  bool OnStraggler(const v1::Run& run, const SweepTriggerEvent& t,
                   const std::map<std::string, v1::Node>& nodes, const std::set<std::string>& busy,
                   const std::string& sweep_id);
  // Each run watch: the runs running now. Moves those whose straggler, seen in their rest,
  // still straggles once it is over; forgets runs that ended and rests long past.
  void Tick(const std::vector<v1::Run>& running, const std::map<std::string, v1::Node>& nodes,
            const std::set<std::string>& busy);
  // Whether a straggler seen during a run's rest waits to be looked at again, the rest being
  // over (Tick has work; until then the run watch lists no nodes for it).
  bool AnyDue();

 private:
  struct Moves {
    absl::Time last;
    int count = 0;
  };
  struct Pending {
    int resumption = 0;
    SweepTriggerEvent trigger;
    std::string sweep_id;
  };
  // Whether the run could go on without `straggler`: it accepts fewer nodes than it has, or an
  // idle node of the straggler's pool (online, schedulable, same cluster, GPU type and count).
  static bool CanGoOn(const v1::Run& run, const std::string& straggler,
                      const std::map<std::string, v1::Node>& nodes,
                      const std::set<std::string>& busy);
  bool Resting(const std::string& run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the run's attempt on the straggler; true when the scheduler did.
  bool Move(const v1::Run& run, const SweepTriggerEvent& t, const std::string& sweep_id,
            const std::string& note);

  std::shared_ptr<SchedulerApi> scheduler_;
  std::shared_ptr<Clock> clock_;
  const StragglerMoveConfig config_;
  const double straggler_factor_;
  absl::Mutex mu_;
  std::map<std::string, Moves> moves_ ABSL_GUARDED_BY(mu_);      // by run id
  std::map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);  // by run id
};

}  // namespace tessera::health
