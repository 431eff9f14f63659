// What Tessera's own components tell the run manager about runs (the scheduler's attempt
// phases, the workers' progress through it) and what the run manager enforces on its own
// (max_duration). People's calls are in run_manager.cc.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "services/common/rpc.h"
#include "services/runs/describe.h"
#include "services/runs/progress_history.h"
#include "services/runs/run_manager.h"
#include "services/store/write_fence.h"

namespace tessera::runs {

absl::Status RunManager::RecordAttempt(const Who& who, const v1::RecordAttemptRequest& req,
                                       v1::RecordAttemptResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "RecordAttempt"));
  if (req.attempt().run_id().empty()) return absl::InvalidArgumentError("attempt.run_id: required");
  if (!req.note().empty()) return RecordNote(req, resp);
  // A scheduler that leads a term says so; its writes are refused once a newer term began.
  std::optional<store::WriteFence> fence;
  if (req.leader_epoch() != 0) {
    fence = store::WriteFence{std::string(store::kSchedulerLeaderRole), req.leader_epoch()};
  }
  auto run = Mutate(
      req.attempt().run_id(),
      [&](const v1::Run& r, const auto& attempts) {
        return ApplyAttemptUpdate(r, CurrentAttempt(r, attempts), req.attempt(), clock_->Now());
      },
      fence);
  if (!run.ok()) return run.status();
  *resp->mutable_run() = *std::move(run);
  return absl::OkStatus();
}

absl::Status RunManager::RecordNote(const v1::RecordAttemptRequest& req,
                                    v1::RecordAttemptResponse* resp) {
  if (req.note().size() > 4096) return absl::InvalidArgumentError("note: at most 4096 bytes");
  auto run = Mutate(
      req.attempt().run_id(), [&](const v1::Run& r, const auto&) -> absl::StatusOr<Transition> {
        Transition t{r, {}, {}, true};
        // A late note of an earlier attempt, or of one that is over, is not news.
        if (r.resumption_index() != req.attempt().resumption_index() || IsTerminal(r.status())) {
          t.changed = false;
          return t;
        }
        t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_SETUP, req.note(), clock_->Now()));
        return t;
      });
  if (!run.ok()) return run.status();
  *resp->mutable_run() = *std::move(run);
  return absl::OkStatus();
}

absl::Status RunManager::ReportProgress(const Who& who, const v1::ReportProgressRequest& req,
                                        v1::ReportProgressResponse*) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "ReportProgress"));
  if (req.run_id().empty()) return absl::InvalidArgumentError("run_id: required");
  std::optional<int64_t> previous_step;  // the attempt's latest step, when the report counts
  auto run = Mutate(
      req.run_id(), [&](const v1::Run& r, const auto& attempts) -> absl::StatusOr<Transition> {
        Transition t{r, {}, {}, true};
        previous_step.reset();
        if (req.resumption_index() != r.resumption_index()) {
          t.changed = false;  // a late report from an earlier attempt
          return t;
        }
        if (!req.node_name().empty() &&
            std::none_of(r.nodes().begin(), r.nodes().end(),
                         [&](const auto& n) { return n.node_name() == req.node_name(); })) {
          // Only the attempt's own nodes report its progress.
          return absl::PermissionDeniedError(absl::StrCat("node ", req.node_name(),
                                                          " reported progress for run ", r.name(),
                                                          ", whose attempt was not placed on it"));
        }
        // Each node's compute time is kept from its own reports, for straggler detection; only
        // the current attempt's nodes count.
        google::protobuf::Map<std::string, double> node_compute;
        for (const auto& n : r.nodes()) {
          auto it = r.progress().node_compute_seconds().find(n.node_name());
          if (it != r.progress().node_compute_seconds().end()) node_compute[it->first] = it->second;
        }
        if (!req.node_name().empty() && req.progress().compute_seconds() > 0) {
          node_compute[req.node_name()] = req.progress().compute_seconds();
        }
        auto current = CurrentAttempt(r, attempts);
        if (current && req.progress().step() < current->last_step()) {
          // Another node's report of a step the attempt already passed (the nodes report in
          // turn, and one's may land after another's later one): the run's step never goes
          // back, so it is not the run's progress; its node's compute time still counts.
          *t.run.mutable_progress()->mutable_node_compute_seconds() = std::move(node_compute);
          return t;
        }
        *t.run.mutable_progress() = req.progress();
        *t.run.mutable_progress()->mutable_node_compute_seconds() = std::move(node_compute);
        *t.run.mutable_progress()->mutable_reported_at() = ToProtoTime(clock_->Now());
        if (current) {
          previous_step = current->last_step();
          current->set_last_step(std::max(current->last_step(), req.progress().step()));
          // The engine knows which checkpoint it loaded; the scheduler does not.
          if (req.progress().resumed_from_step() > 0) {
            current->set_resumed_from_step(req.progress().resumed_from_step());
          }
          t.attempts.push_back(*current);
        }
        return t;
      });
  if (!run.ok()) return run.status();
  if (!previous_step) return absl::OkStatus();
  return KeepProgressPoint(*run, req, *previous_step);
}

absl::Status RunManager::KeepProgressPoint(const v1::Run& run, const v1::ReportProgressRequest& req,
                                           int64_t previous_step) {
  const auto keep = KeepProgress(previous_step, req.progress().step());
  if (!keep) return absl::OkStatus();  // a late report: the history has later points
  store::ProgressPoint point;
  point.resumption_index = req.resumption_index();
  point.step = req.progress().step();
  point.time = FromProtoTime(run.progress().reported_at());
  point.loss = req.progress().loss();
  point.learning_rate = req.progress().learning_rate();
  point.tokens_per_second = req.progress().tokens_per_second();
  point.mfu = req.progress().mfu();
  auto st = runs_->AddProgressPoint(run.id(), point, keep->stride, keep->thin_from);
  // A run deleted since the report was applied has no history to keep.
  return absl::IsNotFound(st) ? absl::OkStatus() : st;
}

absl::StatusOr<int> RunManager::EnforceMaxDuration() {
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
    auto result = Mutate(run.id(), [&](const v1::Run& r, const auto& attempts) {
      return absl::StatusOr<Transition>(
          RequestStop(r, CurrentAttempt(r, attempts), "tessera",
                      absl::StrCat("it exceeded its max_duration of ", hours, " hours"), now));
    });
    if (result.ok()) ++stopped;
  }
  return stopped;
}

absl::StatusOr<int> RunManager::RefreshRunningRunMetrics() {
  if (metrics_ == nullptr) return 0;
  v1::RunFilter filter;
  filter.add_statuses(v1::RUN_STATUS_RUNNING);
  auto running = runs_->ListRuns(filter);
  if (!running.ok()) return running.status();
  const absl::Time now = clock_->Now();
  std::map<std::string, LifecycleMetrics::RunningRun> figures;
  for (const auto& run : *running) {
    auto attempts = runs_->ListAttempts(run.id());
    if (!attempts.ok()) return attempts.status();
    auto events = runs_->ListEvents(run.id());
    if (!events.ok()) return events.status();
    figures[run.name()] = {.goodput = Describe(run, *attempts, *events, now).goodput(),
                           .resumptions = run.resumption_index()};
  }
  metrics_->SetRunningRuns(figures);
  return static_cast<int>(figures.size());
}

}  // namespace tessera::runs
