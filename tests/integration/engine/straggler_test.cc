// A slow node under FULL_SHARD, as the straggler watch sees it: the ranks of one simulated node
// are slowed with real signals (SIGSTOP for 14 ms of every 20, as the worker's `slow` fault at
// 0.3 does; the model is the example's, whose compute is several such periods a step),
// and each rank's reported compute time leaves out its waits for its peers, so that the slow
// node's stands out against the fast node's, which spends most of its step waiting inside the
// forward and backward passes' gathers and reductions.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "tests/integration/engine/scratch.h"
#include "tests/support/engine_job.h"

namespace tessera::testing {
namespace straggler_test {

double Median(std::vector<double> v) {
  REQUIRE(!v.empty());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST_CASE(
    "FULL_SHARD with one node slowed to 0.3: its ranks report 1.5 x the other node's compute "
    "time, and the fast node's leaves out the waits that are most of its step") {
  Scratch s;
  EngineJob job(s.path + "/job",
                s.Config("slow", s.path + "/ckpt", "fsdp: {sharding_strategy: FULL_SHARD}\n",
                         "{preset: tiny, d_model: 256, n_heads: 4, n_layers: 4}"),
                4, {}, 1, 2);
  std::atomic<bool> done{false};
  std::thread throttle([&] {
    const std::vector<pid_t> slow = {job.Pid(2), job.Pid(3)};  // node 1
    while (!done) {
      for (pid_t pid : slow) ::kill(pid, SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(14));
      for (pid_t pid : slow) ::kill(pid, SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(6));
    }
  });
  const auto codes = job.Wait();
  done = true;
  throttle.join();
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << " log:\n" << job.Log(r));
    REQUIRE(codes[static_cast<size_t>(r)] == 0);
  }
  // Past the first steps (start-up, warm-up of the allocator).
  std::vector<double> compute[4], step_seconds;
  for (int r = 0; r < 4; ++r) {
    double previous = 0;
    for (const auto& [step, record] : job.Progress(r)) {
      // A record per step (log_interval 1), each with its time: a step is the time between two.
      if (step > 10) {
        compute[r].push_back(record.compute_seconds);
        if (r == 0) step_seconds.push_back(record.time - previous);
      }
      previous = record.time;
    }
  }
  const double fast = std::max(Median(compute[0]), Median(compute[1]));
  const double slow = std::min(Median(compute[2]), Median(compute[3]));
  const double step = Median(step_seconds);
  std::printf("slowed node's compute %.1f ms a step, the other's %.1f ms, of %.1f ms steps\n",
              slow * 1e3, fast * 1e3, step * 1e3);
  CHECK(slow >= 1.5 * fast);  // the straggler watch's default factor
  CHECK(fast <= 0.5 * step);  // without its waits: most of its step is spent waiting
}

}  // namespace straggler_test
}  // namespace tessera::testing
