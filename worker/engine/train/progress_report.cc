#include "worker/engine/train/progress_report.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "worker/engine/train/model_flops.h"

namespace tessera::engine {

double UnixSecondsNow() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

ProgressReport::ProgressReport(progress::ProgressReporter* reporter, ReportShape shape, Clock clock)
    : reporter_(reporter), shape_(shape), clock_(std::move(clock)) {}

void ProgressReport::Start(int64_t step) {
  last_report_time_ = clock_();
  progress::ProgressRecord r = Standing(step);
  r.ready = true;
  r.time = last_report_time_;
  reporter_->Report(r);
}

progress::ProgressRecord ProgressReport::Standing(int64_t step) const {
  progress::ProgressRecord r;
  r.step = step;
  r.total_steps = shape_.total_steps;
  r.resumed_from_step = resumed_from_step_;
  r.checkpoint_interval_steps = checkpoint_interval_steps_;
  r.checkpoint_save_seconds = last_save_seconds_;
  // The checkpoint it resumed from is committed too.
  r.checkpoint_step = std::max(resumed_from_step_, committed_step_);
  r.loss_rollbacks = loss_rollbacks_;
  r.last_rollback = last_rollback_;
  return r;
}

std::optional<progress::ProgressRecord> ProgressReport::StepDone(int64_t step,
                                                                 const StepResult& result,
                                                                 double step_seconds) {
  window_seconds_ += step_seconds;
  window_compute_seconds_ += result.compute_seconds;
  ++window_steps_;
  const double now = clock_();
  const bool log_step = step % shape_.log_interval == 0 || step == shape_.total_steps;
  if (!log_step && now - last_report_time_ < 1.0) return std::nullopt;
  progress::ProgressRecord r = Standing(step);
  r.loss = result.loss;
  r.learning_rate = result.learning_rate;
  r.tokens_per_second =
      window_seconds_ > 0
          ? static_cast<double>(window_steps_ * shape_.tokens_per_step) / window_seconds_
          : 0;
  r.mfu = Mfu(shape_.flops_per_token, r.tokens_per_second, shape_.peak_flops_per_rank,
              shape_.world_size);
  r.time = now;
  r.compute_seconds = window_compute_seconds_ / static_cast<double>(window_steps_);
  reporter_->Report(r);
  if (shape_.logs && log_step) {
    spdlog::info("step {}/{}: loss {:.6f} lr {:.3e} grad_norm {:.4f} tokens/s {:.0f} MFU {:.2f}%",
                 step, shape_.total_steps, result.loss, result.learning_rate, result.grad_norm,
                 r.tokens_per_second, 100 * r.mfu);
  }
  last_report_time_ = now;
  window_seconds_ = 0;
  window_compute_seconds_ = 0;
  window_steps_ = 0;
  return r;
}

void ProgressReport::RolledBack(progress::LossRollbackRecord rollback) {
  loss_rollbacks_ = rollback.number;
  last_rollback_ = std::move(rollback);
  last_report_time_ = 0;  // the next step's record is due
}

void ProgressReport::AlreadyDone(int64_t step) {
  progress::ProgressRecord r = Standing(step);
  r.time = clock_();
  reporter_->Report(r);
}

}  // namespace tessera::engine
