#pragma once
// Retry delays, one rule for every process: exponential from `first`, doubling with each retry up
// to `max`, each delay drawn uniformly from [low, high] times that, so that many clients cut off
// together (every worker when the scheduler restarts, every webhook of a run) do not retry in
// lockstep. The draw comes from the injected Random (random.h), so tests check exact delays.

#include <memory>

#include "absl/time/time.h"
#include "base/random.h"

namespace tessera {

struct BackoffPolicy {
  absl::Duration first = absl::Milliseconds(100);
  absl::Duration max = absl::Seconds(5);
  // The jitter: a delay is drawn from [low, high] times the exponential one (0 < low <= high).
  double low = 0.5;
  double high = 1.0;
};

// The delay before retry number `retry` (1: the first retry; below 1 counts as 1). For retries
// whose count is kept elsewhere (a notification's attempts, in the database).
absl::Duration BackoffDelay(const BackoffPolicy& policy, int retry, Random& random);

// The same, counting the retries itself: reconnect loops. Not thread-safe (one loop owns it).
class Backoff {
 public:
  Backoff(BackoffPolicy policy, std::shared_ptr<Random> random)
      : policy_(policy), random_(std::move(random)) {}

  // The delay before the next retry.
  absl::Duration Next() { return BackoffDelay(policy_, ++retries_, *random_); }
  // A success: the next failure waits the first delay again.
  void Reset() { retries_ = 0; }

 private:
  const BackoffPolicy policy_;
  const std::shared_ptr<Random> random_;
  int retries_ = 0;
};

}  // namespace tessera
