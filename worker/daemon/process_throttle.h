// Makes a node's workload really slower or stuck, for fault injection: every period the
// processes of the tracked groups (ranks, canaries) run for `factor` of it and are stopped
// (SIGSTOP) for the rest, as a CPU quota would. A factor of 0 stops them for good (a hang); 1
// lets them run. The throttled programs need no cooperation: their steps and canaries measure
// the slowdown themselves.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera::worker {

class ProcessThrottle {
 public:
  // `groups` lists the process groups to throttle now (called every period).
  explicit ProcessThrottle(std::function<std::vector<pid_t>()> groups,
                           absl::Duration period = absl::Milliseconds(20));
  // Lets everything run again.
  ~ProcessThrottle();

  void SetFactor(double factor);
  double factor();

 private:
  void Loop();
  // Waits `d`, or less if the throttle stops: whether it stopped.
  bool WaitForStop(absl::Duration d);
  void Signal(const std::vector<pid_t>& groups, int signal);

  std::function<std::vector<pid_t>()> groups_;
  const absl::Duration period_;
  absl::Mutex mu_;
  double factor_ ABSL_GUARDED_BY(mu_) = 1.0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tessera::worker
