#pragma once
// What the run service does on its own, on timers (RunsComponent, server/components.cc):
// stops the runs past their max_duration, deletes the runs that ended more than the retention
// ago with their logs, and recomputes the running runs' goodput for the metrics and for
// describe's cluster figures. Every instance of the service may run it: its writes are
// compare-and-set (RunWriter), and a run deleted twice is NOT_FOUND the second time.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "services/runs/cluster_reliability.h"
#include "services/runs/log_deleter.h"
#include "services/runs/run_writer.h"
#include "services/store/run_store.h"

namespace tessera::runs {

class RunUpkeep {
 public:
  // `logs` deletes an expired run's logs (null: no log service). `reliability` gets the running
  // goodput (null: no usage store). `run_retention`: zero keeps ended runs until someone deletes
  // them.
  RunUpkeep(std::shared_ptr<store::RunStore> runs, std::shared_ptr<const RunWriter> writer,
            std::shared_ptr<Clock> clock, std::shared_ptr<LogDeleter> logs,
            std::shared_ptr<ClusterReliability> reliability, absl::Duration run_retention);

  // Asks every RUNNING run past its max_duration to stop; returns how many it stopped.
  absl::StatusOr<int> EnforceMaxDuration();
  // Deletes the runs that ended more than the run retention ago, with their attempts, events
  // and logs. A run whose logs cannot be deleted now (the log service is away) is kept until
  // they can, so that no logs outlive their run. Returns how many runs it deleted.
  absl::StatusOr<int> ExpireFinishedRuns();
  // Computes every running run's series (tessera_run_goodput_ratio, tessera_run_resumptions)
  // and the cluster's running goodput that describe shows; returns how many runs it covered (0
  // with neither metrics nor a usage store).
  absl::StatusOr<int> RefreshRunningRunMetrics();

 private:
  // A running run's progress history as RefreshRunningRunMetrics last read it: read again every
  // 5 minutes or when the run resumes, with its newest report added meanwhile (a refresh every
  // 15 s must not read every running run's whole history).
  struct KnownProgress {
    int resumption_index = 0;
    absl::Time read_at;
    std::vector<store::ProgressPoint> points;
  };

  const std::shared_ptr<store::RunStore> runs_;
  const std::shared_ptr<const RunWriter> writer_;
  const std::shared_ptr<Clock> clock_;
  const std::shared_ptr<LogDeleter> logs_;
  const std::shared_ptr<ClusterReliability> reliability_;
  const absl::Duration run_retention_;
  absl::Mutex known_progress_mu_;  // also: one refresh at a time
  std::map<std::string, KnownProgress> known_progress_ ABSL_GUARDED_BY(known_progress_mu_);
};

}  // namespace tessera::runs
