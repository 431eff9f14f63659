#pragma once
// Wakes the followers in this process when a batch commits. Followers also poll the store, so
// lines pushed to another log-service process reach them too, only later.

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "services/common/clock.h"

namespace tessera::logs {

class LogNotifier {
 public:
  // Changes whenever Notify is called.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  void Notify() { generation_.fetch_add(1, std::memory_order_acq_rel); }

  // Returns once generation() differs from `seen` or `timeout` of `clock`'s time has passed.
  // Waits in short steps of the clock, so a fake clock drives it in tests.
  void WaitForChange(uint64_t seen, absl::Duration timeout, Clock& clock) const {
    const absl::Duration step = absl::Milliseconds(10);
    for (absl::Duration waited; waited < timeout && generation() == seen; waited += step) {
      clock.SleepFor(std::min(step, timeout - waited));
    }
  }

 private:
  std::atomic<uint64_t> generation_{0};
};

}  // namespace tessera::logs
