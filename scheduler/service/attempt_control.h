#pragma once
// Stopping and ending attempts: tells the workers of an attempt's nodes to stop its ranks, records
// an attempt's end with the run manager (which requeues or ends the run), and keeps the tracker's
// books in step. The one place that does either, for every role of the scheduler.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/service/attempt_tracker.h"
#include "scheduler/service/progress_relay.h"
#include "scheduler/service/runs_client.h"
#include "scheduler/service/scheduler_config.h"
#include "scheduler/service/worker_registry.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::scheduler {

class AttemptControl {
 public:
  // `progress` (may be null): the workers' reports kept through an outage, delivered before an
  // attempt's end is recorded.
  AttemptControl(std::shared_ptr<AttemptTracker> attempts, std::shared_ptr<RunsClient> runs,
                 std::shared_ptr<WorkerRegistry> workers, SchedulerConfig config,
                 std::shared_ptr<ProgressRelay> progress = nullptr);

  // A fresh id for a command to a worker ("cmd-N"), unique within this instance.
  std::string NextCommandId();
  // Sends a command to `node`'s worker; false when its stream is not on this instance.
  bool Send(const std::string& node, const v1::ControlMessage& message);
  // Tells `node`'s worker to stop the attempt's ranks (SIGTERM, then SIGKILL after the grace).
  void SendStop(const std::string& node, const std::string& run_id, int resumption,
                const std::string& reason);
  // Tells every node of the run's attempt to stop it, once: later calls do nothing. A stop that
  // blames `node`, found by `how`, is the attempt's end whoever records it first (its caller, or
  // the ranks' exits: AttemptState.stop_node).
  void StopAttempt(const v1::Run& run, v1::AttemptEndReason why, const std::string& reason,
                   const std::string& node = "",
                   v1::DetectionMethod how = v1::DETECTION_METHOD_UNSPECIFIED);
  // Records the attempt's end with the run manager, after the progress kept for it; `state`
  // gives its rank exits and first failure. `result`, when set, receives the run as recorded. An
  // end recorded already is not an error.
  absl::Status EndAttempt(const std::string& run_id, int resumption, const AttemptState& state,
                          v1::AttemptEndReason reason, v1::DetectionMethod how,
                          const std::string& detail, v1::Run* result = nullptr);
  // Stops and ends every active attempt with ranks on `node` (only `only_run_id`'s when set),
  // blaming the node; returns the runs' names.
  absl::StatusOr<std::vector<std::string>> EndAttemptsOnNode(const std::string& node,
                                                             v1::AttemptEndReason reason,
                                                             v1::DetectionMethod how,
                                                             const std::string& detail,
                                                             const std::string& only_run_id = "");

 private:
  std::shared_ptr<AttemptTracker> attempts_;
  std::shared_ptr<RunsClient> runs_;
  std::shared_ptr<WorkerRegistry> workers_;
  const SchedulerConfig config_;
  const std::shared_ptr<ProgressRelay> progress_;
  absl::Mutex mu_;
  uint64_t next_command_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace tessera::scheduler
