#include "worker/daemon/process_throttle.h"

#include <signal.h>

#include <algorithm>

namespace tessera::worker {

ProcessThrottle::ProcessThrottle(std::function<std::vector<pid_t>()> groups, absl::Duration period)
    : groups_(std::move(groups)), period_(period), thread_([this] { Loop(); }) {}

ProcessThrottle::~ProcessThrottle() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  Signal(groups_(), SIGCONT);
}

void ProcessThrottle::SetFactor(double factor) {
  absl::MutexLock lock(&mu_);
  factor_ = std::clamp(factor, 0.0, 1.0);
}

double ProcessThrottle::factor() {
  absl::MutexLock lock(&mu_);
  return factor_;
}

void ProcessThrottle::Signal(const std::vector<pid_t>& groups, int signal) {
  for (pid_t g : groups) {
    if (g > 0) ::kill(-g, signal);
  }
}

bool ProcessThrottle::WaitForStop(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
}

void ProcessThrottle::Loop() {
  bool throttling = false;
  while (true) {
    double f;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      f = factor_;
    }
    if (f >= 1.0) {
      if (throttling) Signal(groups_(), SIGCONT);  // cleared: let everything run again
      throttling = false;
      // Nothing to do until a fault is injected: an idle node's thread does not wake.
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ProcessThrottle* t)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) { return t->stopping_ || t->factor_ < 1.0; },
          this));
      continue;
    }
    throttling = true;
    if (f <= 0.0) {  // a hang: whatever starts on the node stops too
      Signal(groups_(), SIGSTOP);
      WaitForStop(period_);
      continue;
    }
    Signal(groups_(), SIGCONT);
    if (WaitForStop(period_ * f)) return;
    Signal(groups_(), SIGSTOP);
    WaitForStop(period_ * (1.0 - f));
  }
}

}  // namespace tessera::worker
