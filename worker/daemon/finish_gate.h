#pragma once
// Holds an ended attempt's FINISHED update until every rank's output is in the log service, or
// for at most a bound: when the control plane learns that an attempt ended (and `mcli logs -f`
// stops following its run) the run's logs are complete, and a log service that is away delays
// an attempt's end by no more than the bound.
//
// Not thread-safe: its owner (AttemptManager) calls it under its own lock.

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "tessera/v1/worker.pb.h"
#include "worker/common/rank_output.h"

namespace tessera::worker {

class FinishGate {
 public:
  // `shipped` says whether a rank's output is all in the log service (LogShipper::Shipped);
  // null: nothing is held. `max_wait` bounds the wait from the attempt's end.
  FinishGate(std::function<bool(const RankOutput&)> shipped, absl::Duration max_wait);

  // Whether FINISHED updates wait for their ranks' output at all.
  bool holds_updates() const { return static_cast<bool>(shipped_); }

  // Holds `finished`, the FINISHED of the attempt (run_id, resumption) that ended at `ended_at`,
  // until each of `outputs` is shipped.
  void Hold(v1::AttemptUpdate finished, std::vector<RankOutput> outputs, absl::Time ended_at);

  // The held updates whose outputs are shipped, or whose wait is over at `now`; no longer held.
  std::vector<v1::AttemptUpdate> Release(absl::Time now);

  // Whether the attempt's FINISHED is held (its heartbeat then says logs_pending).
  bool Holds(const std::string& run_id, int resumption) const;

 private:
  struct Held {
    v1::AttemptUpdate finished;
    std::vector<RankOutput> outputs;
    absl::Time ended_at;
  };
  bool AllShipped(const Held& held) const;

  const std::function<bool(const RankOutput&)> shipped_;
  const absl::Duration max_wait_;
  std::map<std::pair<std::string, int>, Held> held_;
};

}  // namespace tessera::worker
