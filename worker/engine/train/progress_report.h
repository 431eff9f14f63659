#pragma once
// What a rank tells its worker as it trains: a progress record every log_interval steps, at the
// last step and at least once a second. A record carries where the run stands (step, loss, the
// checkpoint interval and the newest save's blocking time, the newest loss rollback) and the
// figures of the steps since the previous record (tokens/s, MFU, compute seconds per step), so
// that a slow window shows as slow however long the run has been fast.

#include <cstdint>
#include <functional>
#include <optional>

#include "worker/progress/progress_file.h"

namespace tessera::engine {

struct StepResult {
  double loss = 0;  // mean over the global batch
  double grad_norm = 0;
  double learning_rate = 0;
  double compute_seconds = 0;  // forward and backward on this rank, less its waits for peers
};

// What does not change during a run.
struct ReportShape {
  int64_t total_steps = 0;
  int64_t tokens_per_step = 0;  // global batch x sequence length
  int64_t log_interval = 1;
  double flops_per_token = 0;
  double peak_flops_per_rank = 0;  // 0: unknown, MFU 0
  int world_size = 1;
  bool logs = false;  // rank 0 also logs each log_interval's step
};

class ProgressReport {
 public:
  // Unix seconds now; tests pass their own.
  using Clock = std::function<double()>;
  ProgressReport(progress::ProgressReporter* reporter, ReportShape shape, Clock clock);

  // The first step, `step` + 1, starts now: a ready record says so to the worker (whose hang
  // watch runs from it), and the first window starts (the set-up before it is no step's time).
  void Start(int64_t step);
  // Step `step` is trained (`step_seconds` end to end); the record sent, where one was due.
  std::optional<progress::ProgressRecord> StepDone(int64_t step, const StepResult& result,
                                                   double step_seconds);
  // Where the run stands, carried by every record.
  void SetResumedFrom(int64_t step) { resumed_from_step_ = step; }
  void SetLossRollbacks(int count) { loss_rollbacks_ = count; }
  void SetCheckpointInterval(int64_t steps) { checkpoint_interval_steps_ = steps; }
  void Saved(double blocking_seconds) { last_save_seconds_ = blocking_seconds; }
  // The newest checkpoint this rank committed (-1: none yet).
  void Committed(int64_t step) { committed_step_ = step; }
  // A loss rollback: every record from now on carries it (the run manager makes it a run event),
  // and the next step's record is due at once.
  void RolledBack(progress::LossRollbackRecord rollback);
  // Nothing left to train: one record of where the run stands.
  void AlreadyDone(int64_t step);

 private:
  progress::ProgressRecord Standing(int64_t step) const;

  progress::ProgressReporter* reporter_;
  ReportShape shape_;
  Clock clock_;
  int64_t resumed_from_step_ = 0;
  int loss_rollbacks_ = 0;
  int64_t checkpoint_interval_steps_ = 0;
  double last_save_seconds_ = 0;
  int64_t committed_step_ = -1;
  progress::LossRollbackRecord last_rollback_;
  // The steps since the previous record.
  double window_seconds_ = 0;
  double window_compute_seconds_ = 0;
  int64_t window_steps_ = 0;
  double last_report_time_ = 0;
};

// Unix seconds, the clock a rank reports with.
double UnixSecondsNow();

}  // namespace tessera::engine
