#pragma once
// Wakes the followers in this process when a batch commits. Followers also poll the store, so
// lines pushed to another log-service process reach them too, only later.

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/common/clock.h"

namespace tessera::logs {

class LogNotifier {
 public:
  // Changes whenever Notify is called.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  void Notify() {
    absl::MutexLock lock(&mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    changed_.SignalAll();
  }

  // Returns once generation() differs from `seen` or `timeout` of `clock`'s time has passed.
  // With the wall clock it blocks on the change itself, so a follower wakes the moment a batch
  // commits (line latency); with a test's fake clock it advances that clock in short steps.
  void WaitForChange(uint64_t seen, absl::Duration timeout, Clock& clock) const {
    if (dynamic_cast<SystemClock*>(&clock) != nullptr) {
      absl::MutexLock lock(&mu_);
      const absl::Time deadline = absl::Now() + timeout;
      while (generation() == seen) {
        if (changed_.WaitWithDeadline(&mu_, deadline)) return;  // timed out
      }
      return;
    }
    const absl::Duration step = absl::Milliseconds(10);
    for (absl::Duration waited; waited < timeout && generation() == seen; waited += step) {
      clock.SleepFor(std::min(step, timeout - waited));
    }
  }

 private:
  mutable absl::Mutex mu_;
  mutable absl::CondVar changed_;
  std::atomic<uint64_t> generation_{0};
};

}  // namespace tessera::logs
