#pragma once
// A background loop of a service: runs a function on its own thread every `interval` of the
// injected clock, from one interval after the start (or at once) until the runner is destroyed. The
// pause is the clock's timed wait, so a test with a FakeClock decides exactly when each run happens
// (FakeClock::AwaitWaiters, then Advance) and a stop ends the pause at once.
//
//   PeriodicRunner timer(clock, absl::Seconds(1), [this] { manager_->EnforceMaxDuration(); });

#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera {

class PeriodicRunner {
 public:
  // When the first run happens.
  enum class FirstRun { kAfterInterval, kAtOnce };
  // Starts the thread. `interval` is measured from the end of one run to the start of the next,
  // so a slow run is never overlapped or followed by a burst of catch-up runs. `due_in` (may be
  // empty), asked after each run, says how soon the next run is due when that is sooner than
  // `interval` (a deadline the runs watch for); zero or less: no deadline ahead.
  PeriodicRunner(std::shared_ptr<Clock> clock, absl::Duration interval, std::function<void()> fn,
                 FirstRun first = FirstRun::kAfterInterval,
                 std::function<absl::Duration()> due_in = nullptr);
  // Stops: a run in progress finishes, no other starts.
  ~PeriodicRunner();

  PeriodicRunner(const PeriodicRunner&) = delete;
  PeriodicRunner& operator=(const PeriodicRunner&) = delete;

 private:
  void Loop();

  const std::shared_ptr<Clock> clock_;
  const absl::Duration interval_;
  const std::function<void()> fn_;
  const FirstRun first_;
  const std::function<absl::Duration()> due_in_;  // may be empty
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once everything it uses is built
};

}  // namespace tessera
