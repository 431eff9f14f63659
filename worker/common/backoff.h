// Reconnect delays: exponential from `initial` to `max`, each drawn uniformly from
// [delay/2, delay] so that many workers cut off together do not reconnect in lockstep. The
// random draw is injected so tests check the exact sequence.
#pragma once

#include <functional>

#include "absl/time/time.h"

namespace tessera::worker {

class Backoff {
 public:
  // `uniform01` returns a number in [0, 1).
  Backoff(absl::Duration initial, absl::Duration max, std::function<double()> uniform01)
      : initial_(initial), max_(max), next_(initial), uniform01_(std::move(uniform01)) {}

  absl::Duration Next() {
    const absl::Duration base = next_;
    next_ = std::min(max_, next_ * 2);
    return base / 2 + (base / 2) * uniform01_();
  }
  void Reset() { next_ = initial_; }

 private:
  const absl::Duration initial_, max_;
  absl::Duration next_;
  std::function<double()> uniform01_;
};

}  // namespace tessera::worker
