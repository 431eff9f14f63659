#pragma once
// What this scheduler instance knows of active attempts beyond the database: which nodes started
// and finished them, the ranks' exits, the stops it sent, and ended attempts whose ranks may still
// be exiting somewhere (draining). Every role of the scheduler reads and writes it; it is rebuilt
// from worker reports and heartbeats after a restart or a takeover, so losing it loses nothing.
//
// Thread-safe: worker streams, the leader's cycle and API calls use it at once.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "tessera/v1/runs.pb.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::scheduler {

// What the nodes of one attempt reported.
struct AttemptState {
  std::set<std::string> started;
  std::set<std::string> finished;
  std::vector<v1::RankExit> exits;
  int first_failed_rank = -1;
  std::string first_failed_node;
  // The first failure was Tessera's (a fenced rank, a lost exit status), not the user's.
  bool control_plane_fault = false;
  // Why the control plane stopped it (STOPPED, PREEMPTED, RESIZED, or a stop that blames a node:
  // a hang, a straggler, a node taken out of service); UNSPECIFIED when it did not.
  v1::AttemptEndReason stop_reason = v1::ATTEMPT_END_REASON_UNSPECIFIED;
  // What the stop said (e.g. why a run was preempted), for the attempt's end.
  std::string stop_detail;
  // A stop that blames a node: the node and how it was found. Its caller records the end, but
  // the ranks' exits (SIGTERM's 143) may reach this instance first: the end they make is the
  // same, never the user's failure.
  std::string stop_node;
  v1::DetectionMethod stop_detection = v1::DETECTION_METHOD_UNSPECIFIED;
  absl::Time stop_sent_at = absl::InfinitePast();
};

// What one worker report did to an active attempt's books.
struct AttemptReport {
  enum class Effect {
    kNotActive,  // the attempt is not active here (ended, or not yet known): nothing changed
    kDrained,    // it already ended, and the node says its ranks are gone
    kRecorded,   // the report was added to the attempt's books
  };
  Effect effect = Effect::kNotActive;
  v1::Run run;                // kRecorded: the attempt's run
  AttemptState state;         // kRecorded: the books after the report
  bool first_start = false;   // the first node to start the attempt
  bool newly_failed = false;  // this report holds the attempt's first failure
  bool all_finished = false;  // every node of the attempt has finished
};

class AttemptTracker {
 public:
  // An ended attempt's nodes that have not confirmed their ranks gone keep their GPUs for at most
  // `drain_limit`; after that the run's next attempt may be placed anyway (fencing keeps the two
  // from overlapping).
  AttemptTracker(std::shared_ptr<Clock> clock, absl::Duration drain_limit);

  // --- the active attempts ---
  // Replaces the active runs with those the leader's cycle read, and forgets the books of
  // attempts no longer among them.
  void SetActive(const std::vector<v1::Run>& active);
  // When the active attempt was placed (first seen, for one this instance did not place): among
  // equally cheap victims of a preemption the newest loses the least work.
  absl::Time PlacedAt(const std::string& run_id, int resumption) const;
  // Adds the runs not known yet (placed before this instance started).
  void LearnActive(const std::vector<v1::Run>& active);
  bool IsActive(const std::string& run_id) const;
  // The run, when `resumption` is its active attempt.
  std::optional<v1::Run> ActiveRun(const std::string& run_id, int resumption) const;
  // The active run named `name` (mcli connect); nullopt when none is.
  std::optional<v1::Run> ActiveRunNamed(const std::string& name) const;
  // The books of an attempt (empty ones when nothing was reported yet).
  AttemptState State(const std::string& run_id, int resumption) const;
  // Whether the attempt's ranks were told to stop (cheaper than State: nothing is copied).
  bool StopSent(const std::string& run_id, int resumption) const;
  // When the attempt's ranks were told to stop; nullopt when they were not.
  std::optional<absl::Time> StopSentAt(const std::string& run_id, int resumption) const;
  // Whether the attempt is known to be over: its run is active at a later attempt, or it ended
  // and is draining. Ranks of it that still run must be stopped.
  bool Superseded(const std::string& run_id, int resumption) const;
  // What `node` reported of the attempt, when it is the run's active attempt; nullopt otherwise.
  // Asked on every heartbeat, so it copies neither the run nor the books.
  struct NodeReports {
    bool started = false;
    bool finished = false;
  };
  std::optional<NodeReports> ReportsFrom(const std::string& run_id, int resumption,
                                         const std::string& node) const;
  // Whether the attempt is its run's active one and placed on `node` now: what a node may
  // report on (Record refuses the rest; a note is dropped).
  bool PlacedOn(const std::string& run_id, int resumption, const std::string& node) const;
  // A placement this instance made: the run's attempt is active from now on.
  void Placed(const v1::Run& run);
  int64_t placements_total() const;

  // --- what workers report ---
  // Adds a worker's report on an attempt to its books. INVALID_ARGUMENT without a phase.
  absl::StatusOr<AttemptReport> Record(const std::string& node, const v1::AttemptUpdate& update);

  // --- stopping and ending ---
  // Notes that the attempt's ranks were told to stop, for `why` (STOPPED, PREEMPTED, RESIZED and
  // a stop that blames `node`, found by `how`, are remembered as the attempt's end). False when
  // a stop was sent already.
  bool MarkStopping(const std::string& run_id, int resumption, v1::AttemptEndReason why,
                    const std::string& detail = "", const std::string& node = "",
                    v1::DetectionMethod how = v1::DETECTION_METHOD_UNSPECIFIED);
  // The attempt ended (recorded with the run manager). Unless it succeeded, the nodes that have
  // not finished (neither in `finished` nor in the books) keep draining it.
  void Ended(const std::string& run_id, int resumption, const std::set<std::string>& finished,
             bool succeeded);

  // --- draining ---
  // A node reported the ended attempt's ranks gone.
  void NodeDrained(const std::string& run_id, int resumption, const std::string& node);
  // A node was lost: its worker fenced itself, so nothing of any attempt runs there.
  void NodeLost(const std::string& node);
  // The ended attempts still draining, each narrowed to its nodes that have not confirmed.
  // Those past the drain limit are dropped (and logged) first.
  std::vector<v1::Run> Draining();

 private:
  using AttemptKey = std::pair<std::string, int>;
  struct DrainingAttempt {
    v1::Run run;  // the ended attempt's run, its nodes narrowed to those still draining
    absl::Time give_up;
  };
  void NodeDrainedLocked(const std::string& run_id, int resumption, const std::string& node)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<Clock> clock_;
  const absl::Duration drain_limit_;
  mutable absl::Mutex mu_;
  std::map<AttemptKey, AttemptState> attempts_ ABSL_GUARDED_BY(mu_);
  // Active runs by id, with the nodes of their current attempt.
  std::map<std::string, v1::Run> active_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, DrainingAttempt> draining_ ABSL_GUARDED_BY(mu_);
  int64_t placements_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<std::string, int>, absl::Time> placed_at_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::scheduler
