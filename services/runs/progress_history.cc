#include "services/runs/progress_history.h"

namespace tessera::runs {

int64_t ProgressStride(int64_t step) {
  int64_t stride = 1;
  while (step >= kMaxProgressBuckets * stride) stride *= 2;
  return stride;
}

std::optional<ProgressKeep> KeepProgress(int64_t previous_step, int64_t step) {
  if (step < 0 || step < previous_step) return std::nullopt;
  ProgressKeep keep{ProgressStride(step), previous_step};
  if (keep.stride != ProgressStride(previous_step)) keep.thin_from = 0;
  return keep;
}

}  // namespace tessera::runs
