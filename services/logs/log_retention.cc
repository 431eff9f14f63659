// The retention of finished runs' logs: LogHandler::ExpireOldLogs.
#include <spdlog/spdlog.h>

#include "base/timestamps.h"
#include "proto/policy/run_status.h"
#include "services/logs/log_handler.h"

namespace tessera::logs {
namespace {

constexpr int kRunsPerPass = 100;

}  // namespace

absl::StatusOr<int> LogHandler::ExpireOldLogs() {
  if (options_.retention <= absl::ZeroDuration()) return 0;
  const absl::Time now = clock_->Now();
  const absl::Time cutoff = now - options_.retention;
  auto idle = logs_->ListRunsIdleSince(cutoff, kRunsPerPass);
  if (!idle.ok()) return idle.status();
  int expired = 0;
  for (const std::string& run_id : *idle) {
    // Only runs that ended before the cutoff (a run that is silent but alive keeps its logs),
    // or that are gone (deleted while the log service could not be told).
    auto desc = runs_->DescribeRunById(run_id);
    if (desc.ok()) {
      const v1::Run& run = desc->run();
      if (!IsTerminal(run.status()) || FromProtoTime(run.ended_at()) >= cutoff) continue;
    } else if (!absl::IsNotFound(desc.status())) {
      return desc.status();  // the run manager is away: next time
    }
    if (auto st = logs_->ExpireRunLogs(run_id, now); !st.ok()) return st;
    ++expired;
    spdlog::info("logs: removed the logs of run {} (ended over {} ago)", run_id,
                 absl::FormatDuration(options_.retention));
  }
  return expired;
}

}  // namespace tessera::logs
