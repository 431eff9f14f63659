// The retention of finished runs: RunManager::ExpireFinishedRuns.
#include <spdlog/spdlog.h>

#include "services/runs/run_manager.h"

namespace tessera::runs {
namespace {

// Runs read per statement, and statements per call: a backlog (the retention just shortened, or
// the service back after a while) goes in a few calls without one call holding on for long.
constexpr int kRunsPerBatch = 200;
constexpr int kBatchesPerCall = 10;

}  // namespace

absl::StatusOr<int> RunManager::ExpireFinishedRuns() {
  if (options_.run_retention <= absl::ZeroDuration()) return 0;
  const absl::Time cutoff = clock_->Now() - options_.run_retention;
  int deleted = 0;
  for (int batch = 0; batch < kBatchesPerCall; ++batch) {
    auto ended = runs_->ListRunsEndedBefore(cutoff, kRunsPerBatch);
    if (!ended.ok()) return ended.status();
    int kept = 0;
    for (const v1::Run& run : *ended) {
      // The logs first: a run is deleted only once nothing of it is left elsewhere.
      if (logs_) {
        if (auto st = logs_->DeleteRunLogs(run.id()); !st.ok()) {
          spdlog::warn("retention: run {} ({}) is kept until its logs can be deleted: {}",
                       run.name(), run.id(), std::string(st.message()));
          ++kept;
          continue;
        }
      }
      // Only as it was read: a run restarted meanwhile is running again, not expired.
      const absl::Status st = runs_->DeleteRun(run.id(), std::nullopt, run.version());
      if (absl::IsNotFound(st) || absl::IsAborted(st)) continue;  // deleted or restarted meanwhile
      if (!st.ok()) return st;
      ++deleted;
    }
    // Kept runs would be listed again: stop at them until the next call.
    if (kept > 0 || static_cast<int>(ended->size()) < kRunsPerBatch) break;
  }
  if (deleted > 0) {
    spdlog::info("retention: deleted {} run(s) that ended over {} ago", deleted,
                 absl::FormatDuration(options_.run_retention));
  }
  return deleted;
}

}  // namespace tessera::runs
