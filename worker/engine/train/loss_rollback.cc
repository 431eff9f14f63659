#include "worker/engine/train/loss_rollback.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::engine {

std::string LossRollback::Judge(double loss) const {
  if (!std::isfinite(loss)) return absl::StrCat("the loss is ", loss);
  if (config_.spike_factor <= 0 || static_cast<int>(recent_.size()) < config_.window) return "";
  std::vector<double> recent(recent_.begin(), recent_.end());
  std::nth_element(recent.begin(), recent.begin() + recent.size() / 2, recent.end());
  const double median = recent[recent.size() / 2];
  if (loss <= config_.spike_factor * median) return "";
  return absl::StrFormat("the loss %.6g is %.2f x the median %.6g of the last %d", loss,
                         loss / median, median, config_.window);
}

void LossRollback::Record(double loss) {
  recent_.push_back(loss);
  if (static_cast<int>(recent_.size()) > config_.window) recent_.pop_front();
}

absl::Status LossRollback::MayRollBack(double loss, const std::string& why, int64_t step) const {
  // A spike is only looked for where it is rolled back; a NaN fails the run unless on_nan.
  if (!std::isfinite(loss) && !config_.on_nan) {
    return absl::InternalError(absl::StrCat(why, " at step ", step));
  }
  if (count_ >= config_.max_rollbacks) {
    return absl::InternalError(absl::StrCat(why, " at step ", step, ", after ", count_,
                                            " rollbacks (loss_rollback.max_rollbacks)"));
  }
  return absl::OkStatus();
}

void LossRollback::RolledBack(const DataState& batch) {
  ++count_;
  if (!Skipped(batch)) skipped_.push_back(batch);
  recent_.clear();
}

void LossRollback::Merge(int rollbacks, const std::vector<DataState>& skipped) {
  count_ = std::max(count_, rollbacks);
  for (const DataState& s : skipped) {
    if (!Skipped(s)) skipped_.push_back(s);
  }
}

DataState LossRollback::SkipFrom(DataState state, const StreamingDataset& dataset) const {
  while (Skipped(state)) state = dataset.Advance(state);
  return state;
}

bool LossRollback::Skipped(const DataState& state) const {
  return std::find(skipped_.begin(), skipped_.end(), state) != skipped_.end();
}

int64_t DebugStep(const char* variable) {
  const char* v = std::getenv(variable);
  int64_t step = -1;
  if (v != nullptr && absl::SimpleAtoi(v, &step)) return step;
  return -1;
}

DebugBadBatches DebugBadBatches::FromEnvironment() {
  return DebugBadBatches(DebugStep("TESSERA_DEBUG_NAN_AT_STEP"),
                         DebugStep("TESSERA_DEBUG_SPIKE_AT_STEP"));
}

DebugBadBatches::DebugBadBatches(int64_t nan_step, int64_t spike_step)
    : nan_step_(nan_step), spike_step_(spike_step) {}

DebugBadBatches::Harm DebugBadBatches::HarmTo(int64_t step, const DataState& batch) {
  if (!nan_batch_ && step == nan_step_) nan_batch_ = batch;
  if (!spike_batch_ && step == spike_step_) spike_batch_ = batch;
  if (nan_batch_ && *nan_batch_ == batch) return Harm::kNan;
  if (spike_batch_ && *spike_batch_ == batch) return Harm::kSpike;
  return Harm::kNone;
}

}  // namespace tessera::engine
