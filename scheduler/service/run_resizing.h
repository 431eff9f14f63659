#pragma once
// Runs that accept fewer nodes than they ask for (compute.min_nodes): when a requeued one may
// start on fewer, the words its RESIZED event says why with, and when one running on fewer grows
// back. Growing stops the run, so it waits for the run's next checkpoint once all of its nodes
// are free: the steps lost are those between that checkpoint and the stop, not an interval's.
// A run that loses a node again within kFlapWindow of growing back (a flapping node) waits
// longer before its next growth: its nodes must stay free for shrink_after × 2^(times it did),
// at most kMaxRegrowDelay, so a node that fails every few minutes does not cost a restart each.
// What it remembers of growths is the leader's own: a new leader starts without it (the worst is
// one undamped growth).
// Used by the leader's cycle (SchedulingCycle), one cycle at a time: no locking; the queue view
// (NodeApi) has its own, and calls only its const methods.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/clock.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::scheduler {

class RunResizing {
 public:
  // `shrink_after`: how long a requeued run waits for all of its nodes before it may start on
  // fewer (SchedulerConfig::shrink_after).
  RunResizing(std::shared_ptr<Clock> clock, absl::Duration shrink_after);

  // The fewest nodes the queued `run` may start on now; 0 while it must have all it asks for (it
  // accepts no fewer, has never run, or has not waited `shrink_after` since it was requeued).
  int MinNodesNow(const v1::Run& run) const;

  // How long the queued `run` must still wait before it may start on fewer nodes: zero when it
  // may now, infinite when it never may (MinNodesNow's conditions).
  absl::Duration UntilShrinkable(const v1::Run& run) const;

  // The run is placed on `placed_nodes`: when fewer than it asks for, it is counted as a flap
  // if it grew back within kFlapWindow. Returns what its RESIZED event says; empty when it has
  // all of them.
  std::string Placed(const v1::Run& run, int placed_nodes);
  // Its words for where: "on 1 of its 2 nodes (compute.min_nodes is 1)"; empty when it has all.
  static std::string PlacedOn(const v1::Run& run, int placed_nodes);

  // For the queue view of a waiting run that accepts fewer nodes once requeued, what it may do
  // ("; it may start on as few as 1 of its 2 nodes (compute.min_nodes) in 42s"); empty for any
  // other run.
  std::string QueueNote(const v1::Run& run) const;

  struct Growth {
    const v1::Run* run = nullptr;
    std::string why;  // the stop's reason, in the RESIZED event
  };
  // The runs of `active` running on fewer nodes than they ask for that should be stopped now to
  // resume on all of them: `can_grow(run)` says whether all could be had now, and the run has
  // committed a checkpoint since they first could (since RegrowDelay after they could, for a
  // run that flaps). A run whose trainer reports no checkpoints (RunProgress.checkpoint_step)
  // never grows: a stop would lose all its work.
  std::vector<Growth> DueToGrow(const std::vector<v1::Run>& active,
                                const std::function<bool(const v1::Run&)>& can_grow);

  // How long the run's nodes must stay free before it grows back: zero unless it lost a node
  // within kFlapWindow of its last growth.
  absl::Duration RegrowDelay(const std::string& run_id) const;

  // A loss this soon after growing back counts as a flap; past it, the count starts over.
  static constexpr absl::Duration kFlapWindow = absl::Hours(1);
  static constexpr absl::Duration kMaxRegrowDelay = absl::Hours(1);

 private:
  struct Waiting {
    int64_t checkpoint = 0;  // the newest checkpoint step when its wait began
    absl::Time free_since;   // when all its nodes were first seen free (in a row)
  };
  struct Growths {
    absl::Time last_grown;  // when it was last stopped to grow back
    absl::Time last_shrunk = absl::InfinitePast();
    int flaps = 0;  // losses within kFlapWindow of growing back, in a row
  };
  std::shared_ptr<Clock> clock_;
  const absl::Duration shrink_after_;
  std::map<std::string, Waiting> waiting_for_checkpoint_;  // by run id
  std::map<std::string, Growths> growths_;                 // by run id
};

// Whether the run is running (or starting) on fewer nodes than it asks for.
bool RunsShrunk(const v1::Run& run);

}  // namespace tessera::scheduler
