#pragma once
// What a run's loss rollbacks need to remember (train_config.h's LossRollbackConfig): the recent
// good losses a spike is judged against, how many rollbacks were made, and the batches they
// skip. The trainer asks it whether a loss is bad and whether a rollback is allowed, and does the
// rollback itself (it owns the checkpoints).

#include <deque>
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

}  // namespace tessera::engine
