#pragma once
// Wakes the followers in this process when a batch commits. Followers also poll the store, so
// lines pushed to another log-service process reach them too, only later.

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera::logs {

class LogNotifier {
 public:
  // Changes whenever Notify is called.
  uint64_t generation() const {
    absl::MutexLock lock(&mu_);
    return generation_;
  }
  void Notify() {
    absl::MutexLock lock(&mu_);
    ++generation_;
  }

  // Returns once generation() differs from `seen` or `timeout` of `clock`'s time has passed. It
  // blocks on the change itself, so a follower wakes the moment a batch commits (line latency);
  // with a test's fake clock the timeout ends when the test moves the clock past it.
  void WaitForChange(uint64_t seen, absl::Duration timeout, Clock& clock) const {
    absl::MutexLock lock(&mu_);
    const auto changed = [this, seen]()
                             ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != seen; };
    clock.AwaitWithTimeout(mu_, absl::Condition(&changed), timeout);
  }

 private:
  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::logs
