#pragma once
// What the health API tells Prometheus: sweeps finished (by trigger), nodes condemned and
// verdicts deferred (by verdict), fabric faults named (by label: switch, rack), and how many nodes
// the last finished sweep condemned (several at once is worth a look: a bad rule or a shared fault,
// not several bad nodes).

#include <string>

#include "tessera/v1/health.pb.h"
#include "transport/metrics/registry.h"

namespace tessera::health {

class HealthMetrics {
 public:
  // Registers its families in `registry` (which outlives it).
  explicit HealthMetrics(metrics::Registry& registry);

  void SweepFinished(const v1::Sweep& sweep);
  void Condemned(v1::HealthVerdict verdict);
  void Deferred(v1::HealthVerdict verdict);
  void FabricFault(const std::string& label);

 private:
  metrics::Family<metrics::Counter>* sweeps_;
  metrics::Family<metrics::Counter>* condemned_;
  metrics::Family<metrics::Counter>* deferred_;
  metrics::Family<metrics::Counter>* fabric_faults_;
  metrics::Gauge* last_sweep_condemned_;
};

}  // namespace tessera::health
