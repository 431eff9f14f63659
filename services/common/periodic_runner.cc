#include "services/common/periodic_runner.h"

namespace tessera {

PeriodicRunner::PeriodicRunner(std::shared_ptr<Clock> clock, absl::Duration interval,
                               std::function<void()> fn, FirstRun first)
    : clock_(std::move(clock)),
      interval_(interval),
      fn_(std::move(fn)),
      first_(first),
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
    {
      absl::MutexLock lock(&mu_);
      if (clock_->AwaitWithTimeout(mu_, absl::Condition(&stop_), interval_)) return;
    }
    fn_();
  }
}

}  // namespace tessera
