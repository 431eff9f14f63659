#pragma once
// A node's compute stress result, as the health tests feed it to the screens and the plans.

#include <string>

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

}  // namespace tessera::health::testing
