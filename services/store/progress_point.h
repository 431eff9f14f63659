#pragma once
// One point of an attempt's progress history: what the charts of a run draw (loss, learning
// rate, tokens/s and MFU over steps). The run manager keeps a bounded number per attempt
// (services/runs/progress_history.h decides which).

#include <cstdint>

#include "absl/time/time.h"

namespace tessera::store {

struct ProgressPoint {
  int32_t resumption_index = 0;
  int64_t step = 0;
  absl::Time time;  // when the run manager received it, to the microsecond
  double loss = 0;
  double learning_rate = 0;
  double tokens_per_second = 0;
  double mfu = 0;

  friend bool operator==(const ProgressPoint&, const ProgressPoint&) = default;
};

}  // namespace tessera::store
