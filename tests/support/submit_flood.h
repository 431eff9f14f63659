#pragma once
// One user submitting runs as fast as the server answers, from `clients` threads, until
// stopped: the attacker of bench_control_plane --flood (scale_harness.h). Each run asks for
// `gpus` in cluster "local". Counts what the server took, refused for a limit
// (RESOURCE_EXHAUSTED) and failed otherwise.
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tessera/v1/runs.grpc.pb.h"

namespace tessera::testing {

struct FloodCounts {
  int64_t accepted = 0, refused = 0, failed = 0;
  std::string first_failure;
};

class SubmitFlood {
 public:
  // Starts at once; `runs` must outlive it.
  SubmitFlood(v1::RunService::Stub& runs, std::string key, int clients, int gpus);
  ~SubmitFlood();

  // Stops every client and returns what they saw (once).
  FloodCounts Stop();

 private:
  void Client(int client);

  v1::RunService::Stub& runs_;
  const std::string key_;
  const int gpus_;
  std::atomic<bool> flooding_{true};
  absl::Mutex mu_;
  FloodCounts counts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> clients_;
};

}  // namespace tessera::testing
