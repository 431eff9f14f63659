#pragma once
// What Tessera's own components report about runs: the scheduler's attempt phases and notes
// (RecordAttempt), the workers' progress, relayed by the scheduler (ReportProgress), kept as
// the run's progress and as points of its history (progress_history.h), and the health API's
// sweeps that passed a node runs keep off (ClearNodeAvoidance). Only the system role reports.
// People's calls are RunManager's; both write through one RunWriter.

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/runs/run_writer.h"
#include "services/store/run_store.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

class RunReports {
 public:
  RunReports(std::shared_ptr<store::RunStore> runs, std::shared_ptr<const RunWriter> writer,
             std::shared_ptr<Clock> clock);

  absl::Status RecordAttempt(const auth::Principal& who, const v1::RecordAttemptRequest& req,
                             v1::RecordAttemptResponse* resp);
  absl::Status ReportProgress(const auth::Principal& who, const v1::ReportProgressRequest& req,
                              v1::ReportProgressResponse* resp);
  // Runs not over that keep off one of the nodes since before the sweep passed it may go there
  // again: avoid_node is cleared, with a NODE_CLEARED event naming the sweep.
  absl::Status ClearNodeAvoidance(const auth::Principal& who,
                                  const v1::ClearNodeAvoidanceRequest& req,
                                  v1::ClearNodeAvoidanceResponse* resp);

 private:
  // A setup note of the run's current attempt, as a SETUP event.
  absl::Status RecordNote(const v1::RecordAttemptRequest& req, v1::RecordAttemptResponse* resp);
  // Keeps the report as a point of the attempt's history, thinned to a bounded number
  // (progress_history.h). `previous_step` is the attempt's last step before this report.
  absl::Status KeepProgressPoint(const v1::Run& run, const v1::ReportProgressRequest& req,
                                 int64_t previous_step);

  const std::shared_ptr<store::RunStore> runs_;
  const std::shared_ptr<const RunWriter> writer_;
  const std::shared_ptr<Clock> clock_;
};

}  // namespace tessera::runs
