#include "worker/engine/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace tessera::engine {

double LearningRate(const OptimizerConfig& optimizer, const SchedulerConfig& scheduler,
                    int64_t step, int64_t total_steps) {
  const int64_t warmup = scheduler.warmup_batches;
  if (warmup > 0 && step < warmup) {
    return optimizer.lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  }
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup));
  const double progress = std::clamp(static_cast<double>(step - warmup) / span, 0.0, 1.0);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return optimizer.lr * (scheduler.alpha_f + (1.0 - scheduler.alpha_f) * cosine);
}

}  // namespace tessera::engine
