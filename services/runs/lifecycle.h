#pragma once
// The run lifecycle as pure functions: what an attempt's progress does to its run.
//
//   PENDING → QUEUED → STARTING → RUNNING → TERMINATING → COMPLETED | STOPPED | FAILED
//
// Each pass through the queue is an attempt (resumption 0, 1, 2 ...). An attempt that ends for a
// system reason (node failure, GPU fault, hang, straggler) puts the run back in the queue as the
// next attempt while retries are left; a preempted one always goes back, without using a retry;
// a non-zero exit of the user's command fails the run.

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/policy/run_status.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

struct Transition {
  v1::Run run;
  std::vector<v1::RunEvent> events;
  // Attempts to write with the run (the updated one, and the next one when requeued).
  std::vector<v1::Attempt> attempts;
  // False when the update changed nothing (a repeated report).
  bool changed = true;
};

bool IsActive(v1::RunStatus status);  // STARTING, RUNNING or TERMINATING

// How many system-failure retries the run gets: 0 when retry_on_system_failure is off in so
// many words, else max_retries when set, else 10 when retry_on_system_failure is on, else 0.
int RetryLimit(const v1::RunSpec& spec);

// Attempts ended by faults of Tessera itself are requeued without using a retry, up to this
// many over the run's life (so that a control plane failing the same way forever cannot loop a
// run without end).
inline constexpr int kMaxControlPlaneInterruptions = 100;
// Attempts whose nodes failed their pre-flight checks a run may have before it fails.
inline constexpr int kMaxPreflightFailures = 20;
// How long a run's next attempt keeps off the node its hang was blamed on, or that it was moved
// off as a straggler (Run.avoid_node): long enough for the node's sweep to decide (tens of
// seconds, minutes behind other sweeps), short enough that a run whose only fitting node that
// is waits no longer than this. A sweep that passes the node sooner ends it then
// (RunReports::ClearNodeAvoidance).
inline constexpr absl::Duration kAvoidSuspectNodeFor = absl::Minutes(5);

// The run's current attempt among `attempts` (the one of its resumption_index), if recorded.
std::optional<v1::Attempt> CurrentAttempt(const v1::Run& run,
                                          const std::vector<v1::Attempt>& attempts);

// Applies `update` (an attempt's new state as the scheduler reports it) to `run`, whose current
// attempt is `current` (nullopt before the first). FAILED_PRECONDITION for a stale or
// out-of-order report; INVALID_ARGUMENT for a malformed one.
absl::StatusOr<Transition> ApplyAttemptUpdate(const v1::Run& run,
                                              const std::optional<v1::Attempt>& current,
                                              const v1::Attempt& update, absl::Time now);

// A stop requested by `actor`: QUEUED/PENDING runs stop at once, active ones go TERMINATING
// (their workers stop the ranks, and the attempt's end makes them STOPPED).
Transition RequestStop(const v1::Run& run, const std::optional<v1::Attempt>& current,
                       const std::string& actor, const std::string& reason, absl::Time now);

v1::RunEvent MakeEvent(const v1::Run& run, v1::RunEventType type, std::string message,
                       absl::Time now);

}  // namespace tessera::runs
