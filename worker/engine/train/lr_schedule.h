#pragma once
// Composer's cosine_with_warmup: linear warmup over t_warmup batches, then a cosine decay to
// alpha_f * lr at the end of the run.

#include <cstdint>

#include "worker/engine/train/train_config.h"

namespace tessera::engine {

// The learning rate for the update of batch `step` (0-based) of a run of `total_steps`.
double LearningRate(const OptimizerConfig& optimizer, const SchedulerConfig& scheduler,
                    int64_t step, int64_t total_steps);

}  // namespace tessera::engine
