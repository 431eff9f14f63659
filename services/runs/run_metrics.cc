// A run's progress history, for its charts: the points each attempt kept (progress_history.h)
// and the attempts themselves (where each resumed, why the one before it ended).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "services/runs/run_manager.h"

namespace tessera::runs {

absl::Status RunManager::GetRunMetrics(const Who& who, const v1::GetRunMetricsRequest& req,
                                       v1::GetRunMetricsResponse* resp) {
  auto run = writer_->ReadVisible(who, req.name());
  if (!run.ok()) return run.status();
  auto points = runs_->ListProgress(run->id());
  if (!points.ok()) return points.status();
  auto attempts = runs_->ListAttempts(run->id());
  if (!attempts.ok()) return attempts.status();
  const bool one = req.has_resumption_index();
  resp->set_run_name(run->name());
  resp->set_total_steps(run->progress().total_steps());
  for (const auto& p : *points) {
    if (one && p.resumption_index != req.resumption_index()) continue;
    auto* out = resp->add_points();
    out->set_resumption_index(p.resumption_index);
    out->set_step(p.step);
    *out->mutable_time() = ToProtoTime(p.time);
    out->set_loss(p.loss);
    out->set_learning_rate(p.learning_rate);
    out->set_tokens_per_second(p.tokens_per_second);
    out->set_mfu(p.mfu);
  }
  for (const auto& a : *attempts) {
    if (one && a.resumption_index() != req.resumption_index()) continue;
    *resp->add_attempts() = a;
  }
  if (one && resp->attempts().empty()) {
    return absl::NotFoundError(
        absl::StrCat("run ", run->name(), " has no attempt ", req.resumption_index()));
  }
  return absl::OkStatus();
}

}  // namespace tessera::runs
