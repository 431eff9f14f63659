#include "base/backoff.h"

#include <algorithm>
#include <cmath>

namespace tessera {

absl::Duration BackoffDelay(const BackoffPolicy& policy, int retry, Random& random) {
  // 2^30 times any first delay is past every max: the clamp keeps the multiplication finite.
  const int doublings = std::clamp(retry - 1, 0, 30);
  const absl::Duration base = std::min(policy.max, policy.first * std::ldexp(1.0, doublings));
  return base * (policy.low + (policy.high - policy.low) * random.Uniform01());
}

}  // namespace tessera
