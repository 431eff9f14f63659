#include "services/runs/run_upkeep.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "services/runs/describe.h"

namespace tessera::runs {
namespace {

// Runs read per statement, and statements per call: a backlog (the retention just shortened, or
// the service back after a while) goes in a few calls without one call holding on for long.
constexpr int kRunsPerBatch = 200;
constexpr int kBatchesPerCall = 10;

}  // namespace

RunUpkeep::RunUpkeep(std::shared_ptr<store::RunStore> runs, std::shared_ptr<const RunWriter> writer,
                     std::shared_ptr<Clock> clock, std::shared_ptr<LogDeleter> logs,
                     std::shared_ptr<ClusterReliability> reliability, absl::Duration run_retention)
    : runs_(std::move(runs)),
      writer_(std::move(writer)),
      clock_(std::move(clock)),
      logs_(std::move(logs)),
      reliability_(std::move(reliability)),
      run_retention_(run_retention) {}

absl::StatusOr<int> RunUpkeep::EnforceMaxDuration() {
  v1::RunFilter filter;
  filter.add_statuses(v1::RUN_STATUS_RUNNING);
  auto running = runs_->ListRuns(filter);
  if (!running.ok()) return running.status();
  int stopped = 0;
  const absl::Time now = clock_->Now();
  for (const auto& run : *running) {
    const double hours = run.spec().scheduling().max_duration_hours();
    if (hours <= 0 || !run.has_started_at()) continue;
    const absl::Duration limit = absl::Seconds(hours * 3600);
    if (now - FromProtoTime(run.started_at()) < limit) continue;
    auto result = writer_->Mutate(run.id(), [&](const v1::Run& r, const auto& attempts) {
      return absl::StatusOr<Transition>(
          RequestStop(r, CurrentAttempt(r, attempts), "tessera",
                      absl::StrCat("it exceeded its max_duration of ", hours, " hours"), now));
    });
    if (result.ok()) ++stopped;
  }
  return stopped;
}

absl::StatusOr<int> RunUpkeep::RefreshRunningRunMetrics() {
  LifecycleMetrics* metrics = writer_->metrics();
  if (metrics == nullptr && reliability_ == nullptr) return 0;
  v1::RunFilter filter;
  filter.add_statuses(v1::RUN_STATUS_RUNNING);
  auto running = runs_->ListRuns(filter);
  if (!running.ok()) return running.status();
  const absl::Time now = clock_->Now();
  std::map<std::string, LifecycleMetrics::RunningRun> figures;
  double weighted = 0;  // the running runs' goodput times their GPUs
  double gpus_running = 0;
  absl::MutexLock lock(&known_progress_mu_);   // one refresh at a time
  std::map<std::string, KnownProgress> known;  // the running runs' only
  for (const auto& run : *running) {
    auto attempts = runs_->ListAttempts(run.id());
    if (!attempts.ok()) return attempts.status();
    auto events = runs_->ListEvents(run.id());
    if (!events.ok()) return events.status();
    auto it = known_progress_.find(run.id());
    if (it == known_progress_.end() || it->second.resumption_index != run.resumption_index() ||
        now - it->second.read_at > absl::Minutes(5)) {
      auto progress = runs_->ListProgress(run.id());
      if (!progress.ok()) return progress.status();
      it = known_progress_
               .insert_or_assign(run.id(),
                                 KnownProgress{run.resumption_index(), now, *std::move(progress)})
               .first;
    }
    std::vector<store::ProgressPoint> points = it->second.points;
    const v1::RunProgress& p = run.progress();
    if (p.step() > 0 && p.has_reported_at() &&
        (points.empty() || points.back().resumption_index != run.resumption_index() ||
         points.back().step < p.step())) {
      store::ProgressPoint newest;
      newest.resumption_index = run.resumption_index();
      newest.step = p.step();
      newest.time = FromProtoTime(p.reported_at());
      points.push_back(newest);
    }
    known[run.id()] = it->second;
    const double goodput = Describe(run, *attempts, *events, points, now).goodput();
    figures[run.name()] = {.goodput = goodput, .resumptions = run.resumption_index()};
    const double gpus = std::max(1, run.spec().compute().gpus());
    weighted += goodput * gpus;
    gpus_running += gpus;
  }
  known_progress_ = std::move(known);
  const std::optional<double> cluster_goodput =
      gpus_running > 0 ? std::optional(weighted / gpus_running) : std::nullopt;
  if (metrics) {
    metrics->SetRunningRuns(figures);
    metrics->SetClusterGoodput(cluster_goodput);
  }
  if (reliability_) reliability_->SetRunningGoodput(cluster_goodput);
  return static_cast<int>(figures.size());
}

absl::StatusOr<int> RunUpkeep::ExpireFinishedRuns() {
  if (run_retention_ <= absl::ZeroDuration()) return 0;
  const absl::Time cutoff = clock_->Now() - run_retention_;
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
                 absl::FormatDuration(run_retention_));
  }
  return deleted;
}

}  // namespace tessera::runs
