// Runs the health API's canaries on this node: each StartCanary becomes a tessera-canary process
// (in its own process group, so that injected faults slow or stop it as they do ranks) whose one
// line of JSON output becomes the HealthCheckResult sent back to the control plane. A canary that
// dies without a result is reported as an error with how it ended; one that outlives its timeout
// is killed and reported as a timeout.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::worker {

class CanaryRunner {
 public:
  CanaryRunner(std::string binary, std::string node_name, std::string state_dir,
               std::shared_ptr<Clock> clock);
  // Kills the canaries still running.
  ~CanaryRunner();

  // Starts the canary in the background; a request that cannot run is an error now.
  absl::Status Start(const v1::StartCanary& start);
  // Results of the canaries that ended since the last call.
  std::vector<v1::HealthCheckResult> TakeResults();
  std::vector<pid_t> ProcessGroups();

  // The tessera-canary arguments for a request (also what a person would run by hand).
  static absl::StatusOr<std::vector<std::string>> Arguments(const v1::StartCanary& start);

 private:
  void Run(v1::StartCanary start, std::vector<std::string> args);

  const std::string binary_, node_name_, state_dir_;
  const std::shared_ptr<Clock> clock_;
  absl::Mutex mu_;
  std::vector<v1::HealthCheckResult> results_ ABSL_GUARDED_BY(mu_);
  std::vector<pid_t> running_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::worker
