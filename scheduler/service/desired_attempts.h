#pragma once
// Desired state, reconciled on every heartbeat. The leader remembers each start command it sent
// until the node's heartbeat shows the attempt; a heartbeat that does not show a start sent at
// least `resend_after` ago gets it again: a command lost on the wire, or a node whose stream was
// not on this instance when the run was placed, costs a run at most that long in STARTING, never
// forever. Stops are resent the same way while a node still reports ranks of an attempt it was
// told to stop. The worker treats a repeated command as the same one.

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::scheduler {

class DesiredAttempts {
 public:
  DesiredAttempts(std::shared_ptr<Clock> clock, absl::Duration resend_after);

  // A start command went to `node` (or could not, for want of a stream: it is due at once).
  void StartSent(const std::string& node, const v1::StartAttempt& start, bool delivered);
  // The starts for `node` to send again: those its heartbeat does not list and that were sent
  // `resend_after` ago or more (each is then counted as sent now). A start the heartbeat lists
  // has arrived and is forgotten.
  std::vector<v1::StartAttempt> StartsDue(const std::string& node, const v1::Heartbeat& hb);
  // The attempt ended or moved: its starts are no longer wanted anywhere.
  void Forget(const std::string& run_id, int resumption);
  // Whether a stop of the attempt on `node` may be sent (again) now; if so, it counts as sent.
  bool StopDue(const std::string& node, const std::string& run_id, int resumption);

 private:
  using Key = std::tuple<std::string, std::string, int>;  // node, run id, resumption
  struct Pending {
    v1::StartAttempt start;
    absl::Time sent_at;
  };
  const std::shared_ptr<Clock> clock_;
  const absl::Duration resend_after_;
  absl::Mutex mu_;
  std::map<Key, Pending> starts_ ABSL_GUARDED_BY(mu_);
  std::map<Key, absl::Time> stops_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::scheduler
