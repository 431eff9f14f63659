#pragma once
// A node's compute stress result, as the health tests feed it to the screens and the plans.

#include <string>
#include <utility>
#include <vector>

#include "tessera/v1/health.pb.h"

namespace tessera::health::testing {

inline v1::HealthCheckResult Measured(const std::string& node, double tflops, int step = 0,
                                      v1::HealthVerdict verdict = v1::HEALTH_VERDICT_PASSED) {
  v1::HealthCheckResult r;
  r.set_node_name(node);
  r.set_kind(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  r.set_verdict(verdict);
  r.set_compute_tflops(tflops);
  r.set_step(step);
  return r;
}

// First (step 0) measurements taken one after another, a second apart, in this order.
inline std::vector<v1::HealthCheckResult> InTurn(
    const std::vector<std::pair<std::string, double>>& figures) {
  std::vector<v1::HealthCheckResult> results;
  for (size_t i = 0; i < figures.size(); ++i) {
    results.push_back(Measured(figures[i].first, figures[i].second));
    results.back().mutable_finished_at()->set_seconds(static_cast<int64_t>(100 + i));
  }
  return results;
}

}  // namespace tessera::health::testing
