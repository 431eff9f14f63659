#include "transport/periodic_runner.h"

#include <algorithm>

namespace tessera {

PeriodicRunner::PeriodicRunner(std::shared_ptr<Clock> clock, absl::Duration interval,
                               std::function<void()> fn, FirstRun first,
                               std::function<absl::Duration()> due_in)
    : clock_(std::move(clock)),
      interval_(interval),
      fn_(std::move(fn)),
      first_(first),
      due_in_(std::move(due_in)),
      thread_([this] { Loop(); }) {}

PeriodicRunner::~PeriodicRunner() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void PeriodicRunner::Loop() {
  if (first_ == FirstRun::kAtOnce) fn_();
  for (;;) {
    // A deadline already past is not waited for (it was the run's to handle): counting it
    // would make the loop spin.
    absl::Duration pause = interval_;
    if (due_in_) {
      if (const absl::Duration due = due_in_(); due > absl::ZeroDuration()) {
        pause = std::min(due, interval_);
      }
    }
    {
      absl::MutexLock lock(&mu_);
      if (clock_->AwaitWithTimeout(mu_, absl::Condition(&stop_), pause)) return;
    }
    fn_();
  }
}

}  // namespace tessera
