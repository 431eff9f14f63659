#pragma once
// Verdicts the health API does not act on because other tenants' runs shared the node while it
// was measured (sweep_neighbours.h), and the nodes it drained for them instead of cordoning:
// each is swept again with idle peers once nothing runs on it, and returns to service when it
// passes (a node that fails that sweep is cordoned on its own figures, as any other).

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "healthcheck/anomaly.h"
#include "healthcheck/health_clients.h"
#include "healthcheck/health_metrics.h"
#include "tessera/v1/health.pb.h"

namespace tessera::health {

// The prefix of the reasons the health API cordons and drains with (so it knows which nodes it
// may return).
inline constexpr char kCordonReasonPrefix[] = "health: ";
// The prefix of a sweep's findings that were not acted on ("deferred: NODE: ...").
inline constexpr char kDeferredPrefix[] = "deferred: ";

class DeferredVerdicts {
 public:
  // Makes a sweep of `nodes` whose suspect is `node` (SweepLauncher::CreateSweep).
  using MakeSweep = std::function<absl::StatusOr<v1::Sweep>(
      const std::vector<std::string>& nodes, const std::string& node, const std::string& detail)>;

  // `metrics` may be null.
  DeferredVerdicts(std::shared_ptr<CordonApi> cordon, std::shared_ptr<HealthMetrics> metrics)
      : cordon_(std::move(cordon)), metrics_(metrics) {}

  // Whether any of `nodes` is drained by the health API (on a deferred verdict).
  static bool AnyDrained(const std::map<std::string, v1::Node>& nodes);
  // Whether `sweep` deferred its verdict on `node` already (at an earlier stage).
  static bool DeferredIn(const v1::Sweep& sweep, const std::string& node);
  // Records `a` in `sweep` as deferred, naming the runs `others` that shared its node, and
  // drains the node.
  void Defer(v1::Sweep& sweep, const Anomaly& a, const std::set<std::string>& others);
  // Sweeps again each drained node on which nothing in `running` runs and that no sweep in
  // `sweeps` is measuring, with up to `max_peers` idle peers beside it.
  void Remeasure(const std::map<std::string, v1::Node>& nodes, const std::vector<v1::Run>& running,
                 const std::vector<v1::Sweep>& sweeps, int max_peers, const MakeSweep& make) const;
  // Returns to service the drained nodes that `finished` measured and passed.
  void ReturnPassed(const v1::Sweep& finished, const std::map<std::string, v1::Node>& nodes) const;

 private:
  static bool DrainedByUs(const v1::Node& node);

  std::shared_ptr<CordonApi> cordon_;
  std::shared_ptr<HealthMetrics> metrics_;
};

}  // namespace tessera::health
