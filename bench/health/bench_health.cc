// bench_health: detection quality of the health sweep. 100 sweeps (--sweeps) over 8 simulated
// nodes (--nodes), one of them 20% slow (--slow 0.8): each node's compute stress test is a real
// tessera-canary process started by the worker's CanaryRunner, and the slow node's is really
// slowed by the worker's ProcessThrottle (the code behind `inject-fault --kind slow:0.8`). The
// nodes share this machine, so they are measured as a sweep measures such nodes: one at a time,
// twice, the second pass starting halfway. Each sweep's results go through the health API's
// FindAnomalies. Prints how often the slow node was found and how often a healthy
// node was condemned (the targets: every time, and never).
//
//   bench_health [--sweeps N] [--nodes N] [--slow FACTOR] [--seconds S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "healthcheck/anomaly.h"
#include "worker/daemon/canary_runner.h"
#include "worker/daemon/process_throttle.h"

namespace {
using namespace tessera;

void StartCompute(worker::CanaryRunner& runner, const std::string& sweep, double seconds) {
  v1::StartCanary c;
  c.set_sweep_id(sweep);
  c.set_kind(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  c.set_seconds(seconds);
  c.mutable_timeout()->set_seconds(60);
  if (!runner.Start(c).ok()) std::abort();
}

v1::HealthCheckResult Collect(worker::CanaryRunner& runner) {
  for (;;) {
    auto results = runner.TakeResults();
    if (!results.empty()) return results[0];
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int sweeps = 100, nodes = 8;
  double slow = 0.8, seconds = 0.3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    double v = 0;
    if (!absl::SimpleAtod(argv[i + 1], &v)) {
      std::cerr << "bad value for " << flag << "\n";
      return 2;
    }
    if (flag == "--sweeps")
      sweeps = static_cast<int>(v);
    else if (flag == "--nodes")
      nodes = static_cast<int>(v);
    else if (flag == "--slow")
      slow = v;
    else if (flag == "--seconds")
      seconds = v;
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  const std::string canary = std::string(TESSERA_BIN_DIR) + "/tessera-canary";
  const std::string state = "/tmp/tessera-bench-health";
  std::vector<std::unique_ptr<worker::CanaryRunner>> runners;
  for (int n = 0; n < nodes; ++n) {
    runners.push_back(std::make_unique<worker::CanaryRunner>(canary, absl::StrCat("node-", n),
                                                             state, SystemClock::Shared()));
  }
  const int slow_node = nodes / 2;
  worker::CanaryRunner* slow_runner = runners[static_cast<size_t>(slow_node)].get();
  worker::ProcessThrottle throttle([slow_runner] { return slow_runner->ProcessGroups(); },
                                   absl::Milliseconds(20));
  throttle.SetFactor(slow);

  int found = 0, false_positives = 0;
  std::vector<double> fractions;  // the slow node's rate over the median, per sweep
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> names;
  for (int n = 0; n < nodes; ++n) names.push_back(absl::StrCat("node-", n));
  for (int s = 0; s < sweeps; ++s) {
    // As a sweep checks nodes that share a machine: one at a time, twice, the second pass
    // starting halfway (FindAnomalies keeps each node's better figure).
    std::vector<v1::HealthCheckResult> results;
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < nodes; ++i) {
        auto& runner = *runners[static_cast<size_t>(pass == 0 ? i : (i + nodes / 2) % nodes)];
        StartCompute(runner, absl::StrCat("b", s), seconds);
        results.push_back(Collect(runner));
        if (std::getenv("BENCH_HEALTH_RAW") != nullptr) {  // for studying the detection offline
          const auto& r = results.back();
          std::printf("raw %d %s %d %.6f %.3f\n", s, r.node_name().c_str(), pass,
                      r.compute_tflops(),
                      r.finished_at().seconds() + r.finished_at().nanos() / 1e9);
        }
      }
    }
    std::vector<double> rates(static_cast<size_t>(nodes), 0.0);  // each node's best
    for (const auto& r : results) {
      const size_t n = static_cast<size_t>(std::stoi(r.node_name().substr(5)));
      rates[n] = std::max(rates[n], r.compute_tflops());
    }
    if (std::getenv("BENCH_HEALTH_VERBOSE") != nullptr) {
      std::printf("sweep %d:", s);
      for (double r : rates) std::printf(" %.3f", r);
      std::printf("\n");
    }
    fractions.push_back(rates[static_cast<size_t>(slow_node)] / health::Median(rates));
    bool hit = false;
    for (const auto& a : health::FindAnomalies(names, {}, results, health::AnomalyConfig{})) {
      if (a.node == names[static_cast<size_t>(slow_node)]) {
        hit = true;
      } else {
        ++false_positives;
        std::printf("sweep %d: healthy %s condemned: %s\n", s, a.node.c_str(), a.finding.c_str());
      }
    }
    found += hit ? 1 : 0;
    if (!hit) std::printf("sweep %d: slow node missed (%.2f of the median)\n", s, fractions.back());
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(fractions.begin(), fractions.end());
  std::printf("%d sweeps of %d nodes, node-%d at %.0f%% speed (%.0f s):\n", sweeps, nodes,
              slow_node, 100 * slow, elapsed);
  std::printf("  slow node found: %d/%d = %.1f%% (target 100%%)\n", found, sweeps,
              100.0 * found / sweeps);
  std::printf("  healthy nodes condemned: %d/%d = %.2f%% (target 0%%)\n", false_positives,
              sweeps * (nodes - 1), 100.0 * false_positives / (sweeps * (nodes - 1)));
  std::printf("  the slow node measured %.2f-%.2f of its peers' median (median %.2f)\n",
              fractions.front(), fractions.back(), fractions[fractions.size() / 2]);
  return 0;
}
