#include "services/runs/run_reports.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "base/utf8.h"
#include "services/common/rpc.h"
#include "services/runs/progress_history.h"
#include "services/store/leader_lock_store.h"
#include "services/store/write_fence.h"

namespace tessera::runs {
namespace {

constexpr size_t kMaxRollbackReason = 300;

// Whether `req` tells of a loss rollback the run has not recorded yet: within an attempt the
// engine numbers them in order; a later attempt (resumed from an older checkpoint, its count
// lower) starts news of its own.
bool IsNewLossRollback(const v1::Run& r, const v1::ReportProgressRequest& req) {
  const auto& reported = req.progress().last_loss_rollback();
  if (reported.number() <= 0) return false;
  const auto& known = r.progress().last_loss_rollback();
  return known.number() <= 0 || req.resumption_index() > known.resumption_index() ||
         reported.number() > known.number();
}

// The rollback `req` tells of, kept in `progress` and as the event people see.
v1::RunEvent RecordLossRollback(const v1::Run& r, const v1::ReportProgressRequest& req,
                                v1::RunProgress& progress, absl::Time now) {
  v1::LossRollbackReport b = req.progress().last_loss_rollback();
  const v1::LossRollbackReport& known = progress.last_loss_rollback();
  // Rollbacks that came too close together to be reported apart (the worker sends each at once;
  // this is for the rare one that still merges).
  const int unreported = known.number() > 0 && known.resumption_index() == req.resumption_index()
                             ? b.number() - known.number() - 1
                             : 0;
  b.set_resumption_index(req.resumption_index());
  if (b.reason().size() > kMaxRollbackReason) b.mutable_reason()->resize(kMaxRollbackReason);
  *b.mutable_reason() = ToValidUtf8(b.reason());
  *progress.mutable_last_loss_rollback() = b;
  progress.set_loss_rollbacks(std::max(progress.loss_rollbacks(), req.progress().loss_rollbacks()));
  v1::RunEvent e = MakeEvent(
      r, v1::RUN_EVENT_TYPE_LOSS_ROLLBACK,
      absl::StrCat("Loss rollback ", b.number(), " of ", b.max_rollbacks(), ": ", b.reason(),
                   " at step ", b.bad_step(), "; training went back to the checkpoint of step ",
                   b.checkpoint_step(), " and skips that step's batch",
                   unreported > 0
                       ? absl::StrCat(" (", unreported, " earlier one(s) not reported apart)")
                       : ""),
      now);
  auto& d = *e.mutable_details();
  d["number"] = absl::StrCat(b.number());
  d["max_rollbacks"] = absl::StrCat(b.max_rollbacks());
  d["bad_step"] = absl::StrCat(b.bad_step());
  d["checkpoint_step"] = absl::StrCat(b.checkpoint_step());
  d["reason"] = b.reason();
  if (!req.node_name().empty()) d["node"] = req.node_name();
  return e;
}

// When the report was made: the time the scheduler stamped as it arrived (a report kept through
// an outage of this service or its database arrives late), never later than now nor more than a
// day before; now where it says nothing.
absl::Time ReportedAt(const v1::ReportProgressRequest& req, absl::Time now) {
  if (!req.progress().has_reported_at()) return now;
  const absl::Time stamped = FromProtoTime(req.progress().reported_at());
  return stamped <= now && stamped > now - absl::Hours(24) ? stamped : now;
}

}  // namespace

RunReports::RunReports(std::shared_ptr<store::RunStore> runs,
                       std::shared_ptr<const RunWriter> writer, std::shared_ptr<Clock> clock)
    : runs_(std::move(runs)), writer_(std::move(writer)), clock_(std::move(clock)) {}

absl::Status RunReports::RecordAttempt(const auth::Principal& who,
                                       const v1::RecordAttemptRequest& req,
                                       v1::RecordAttemptResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "RecordAttempt"));
  if (req.attempt().run_id().empty()) return absl::InvalidArgumentError("attempt.run_id: required");
  if (!req.note().empty()) return RecordNote(req, resp);
  // A scheduler that leads a term says so; its writes are refused once a newer term began.
  std::optional<store::WriteFence> fence;
  if (req.leader_epoch() != 0) {
    fence = store::WriteFence{std::string(store::kSchedulerLeaderRole), req.leader_epoch()};
  }
  auto run = writer_->Mutate(
      req.attempt().run_id(),
      [&](const v1::Run& r, const auto& attempts) {
        return ApplyAttemptUpdate(r, CurrentAttempt(r, attempts), req.attempt(), clock_->Now());
      },
      fence);
  if (!run.ok()) return run.status();
  *resp->mutable_run() = *std::move(run);
  return absl::OkStatus();
}

absl::Status RunReports::RecordNote(const v1::RecordAttemptRequest& req,
                                    v1::RecordAttemptResponse* resp) {
  if (req.note().size() > 4096) return absl::InvalidArgumentError("note: at most 4096 bytes");
  auto run = writer_->Mutate(
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

absl::Status RunReports::ReportProgress(const auth::Principal& who,
                                        const v1::ReportProgressRequest& req,
                                        v1::ReportProgressResponse*) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "ReportProgress"));
  if (req.run_id().empty()) return absl::InvalidArgumentError("run_id: required");
  std::optional<int64_t> previous_step;  // the attempt's latest step, when the report counts
  auto run = writer_->Mutate(
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
        // A rollback is news whatever the step: the engine went back to an older one.
        std::optional<v1::RunProgress> rollback;
        if (IsNewLossRollback(r, req)) {
          rollback = r.progress();
          t.events.push_back(RecordLossRollback(r, req, *rollback, clock_->Now()));
        }
        const v1::RunProgress& known = rollback ? *rollback : r.progress();
        auto current = CurrentAttempt(r, attempts);
        if (current && req.progress().step() < current->last_step()) {
          // Another node's report of a step the attempt already passed (the nodes report in
          // turn, and one's may land after another's later one): the run's step never goes
          // back, so it is not the run's progress; its node's compute time still counts.
          *t.run.mutable_progress() = known;
          *t.run.mutable_progress()->mutable_node_compute_seconds() = std::move(node_compute);
          return t;
        }
        *t.run.mutable_progress() = req.progress();
        // The rollbacks are the run's, not the report's: a report that does not know of the
        // newest (from a resumed attempt) keeps what is known.
        *t.run.mutable_progress()->mutable_last_loss_rollback() = known.last_loss_rollback();
        t.run.mutable_progress()->set_loss_rollbacks(
            std::max(known.loss_rollbacks(), req.progress().loss_rollbacks()));
        // Only the rank that commits checkpoints knows the newest: the others' reports say 0.
        t.run.mutable_progress()->set_checkpoint_step(
            std::max(known.checkpoint_step(), req.progress().checkpoint_step()));
        *t.run.mutable_progress()->mutable_node_compute_seconds() = std::move(node_compute);
        *t.run.mutable_progress()->mutable_reported_at() =
            ToProtoTime(ReportedAt(req, clock_->Now()));
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

absl::Status RunReports::KeepProgressPoint(const v1::Run& run, const v1::ReportProgressRequest& req,
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

absl::Status RunReports::ClearNodeAvoidance(const auth::Principal& who,
                                            const v1::ClearNodeAvoidanceRequest& req,
                                            v1::ClearNodeAvoidanceResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "ClearNodeAvoidance"));
  if (req.node_names().empty()) return absl::InvalidArgumentError("node_names: required");
  if (req.node_names_size() > 100000) {
    return absl::InvalidArgumentError("node_names: at most 100000");
  }
  for (const auto& n : req.node_names()) {
    if (n.empty() || n.size() > 253) {
      return absl::InvalidArgumentError("node_names: each 1-253 bytes");
    }
  }
  if (req.sweep_id().empty() || req.sweep_id().size() > 128) {
    return absl::InvalidArgumentError("sweep_id: 1-128 bytes required");
  }
  if (!req.has_passed_at()) return absl::InvalidArgumentError("passed_at: required");
  const absl::Time passed_at = FromProtoTime(req.passed_at());
  const std::set<std::string> passed(req.node_names().begin(), req.node_names().end());
  // Kept off one of the nodes now, since before the sweep passed it: a pass the suspicion came
  // after says nothing of it.
  const auto kept_off = [&](const v1::Run& r, absl::Time now) {
    if (r.avoid_node().empty() || !passed.count(r.avoid_node()) || !r.has_avoid_node_until()) {
      return false;
    }
    const absl::Time until = FromProtoTime(r.avoid_node_until());
    return until > now && until - kAvoidSuspectNodeFor <= passed_at && !IsTerminal(r.status());
  };
  v1::RunFilter filter;
  for (auto status : {v1::RUN_STATUS_QUEUED, v1::RUN_STATUS_PENDING, v1::RUN_STATUS_STARTING,
                      v1::RUN_STATUS_RUNNING, v1::RUN_STATUS_TERMINATING}) {
    filter.add_statuses(status);
  }
  auto runs = runs_->ListRuns(filter);
  if (!runs.ok()) return runs.status();
  for (const auto& listed : *runs) {
    if (!kept_off(listed, clock_->Now())) continue;
    bool cleared = false;
    auto run = writer_->Mutate(
        listed.id(), [&](const v1::Run& r, const auto&) -> absl::StatusOr<Transition> {
          Transition t{r, {}, {}, kept_off(r, clock_->Now())};
          cleared = t.changed;
          if (!t.changed) return t;
          t.events.push_back(
              MakeEvent(r, v1::RUN_EVENT_TYPE_NODE_CLEARED,
                        absl::StrCat("node ", r.avoid_node(), " passed health sweep ",
                                     req.sweep_id(), ": the run may be placed there again"),
                        clock_->Now()));
          t.run.clear_avoid_node();
          t.run.clear_avoid_node_until();
          return t;
        });
    if (absl::IsNotFound(run.status())) continue;  // deleted since it was listed
    if (!run.ok()) return run.status();
    if (cleared) resp->add_run_names(run->name());
  }
  return absl::OkStatus();
}

}  // namespace tessera::runs
