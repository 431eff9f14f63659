#pragma once
// What a run's loss rollbacks need to remember (train_config.h's LossRollbackConfig): the recent
// good losses a spike is judged against, how many rollbacks were made, and the batches they
// skip. The trainer asks it whether a loss is bad and whether a rollback is allowed, and does the
// rollback itself (it owns the checkpoints).

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/engine/data/streaming_dataset.h"
#include "worker/engine/train/train_config.h"

namespace tessera::engine {

class LossRollback {
 public:
  explicit LossRollback(LossRollbackConfig config) : config_(config) {}

  // Why `loss` is bad: NaN or infinite, or a spike over the recent median (where spikes are
  // looked for); empty: it is not.
  std::string Judge(double loss) const;
  // A good loss, for the spike's median.
  void Record(double loss);
  // OK where the bad `loss` of `step` (`why` it is bad) may be rolled back; otherwise the error
  // that fails the run, naming the loss and the step.
  absl::Status MayRollBack(double loss, const std::string& why, int64_t step) const;
  // A rollback was made: `batch` is skipped from now on, and the recent losses start again.
  void RolledBack(const DataState& batch);
  // What a checkpoint being loaded says was rolled back before it (counted and skipped too).
  void Merge(int rollbacks, const std::vector<DataState>& skipped);
  // `state`, moved past the batches a rollback skips.
  DataState SkipFrom(DataState state, const StreamingDataset& dataset) const;

  int count() const { return count_; }
  int max() const { return config_.max_rollbacks; }
  const std::vector<DataState>& skipped() const { return skipped_; }

 private:
  bool Skipped(const DataState& state) const;

  LossRollbackConfig config_;
  std::deque<double> recent_;  // the last `window` good losses
  int count_ = 0;
  std::vector<DataState> skipped_;
};

// Test hooks that make a bad batch: the batch first trained as step TESSERA_DEBUG_NAN_AT_STEP
// (or TESSERA_DEBUG_SPIKE_AT_STEP) has a NaN loss (or 100 times its loss) wherever it is trained
// again, so that a test sees a rollback skip it.
class DebugBadBatches {
 public:
  enum class Harm { kNone, kNan, kSpike };
  static DebugBadBatches FromEnvironment();
  DebugBadBatches(int64_t nan_step, int64_t spike_step);

  // What to do to `batch`, trained as step `step` (counted from 1).
  Harm HarmTo(int64_t step, const DataState& batch);

 private:
  int64_t nan_step_, spike_step_;  // -1: none
  std::optional<DataState> nan_batch_, spike_batch_;
};

// A step number from a test hook's environment variable; -1 where it is not set.
int64_t DebugStep(const char* variable);

}  // namespace tessera::engine
