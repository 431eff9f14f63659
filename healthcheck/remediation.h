#pragma once
// What the health API does about what it finds: a condemned node is cordoned with the evidence
// and every run with an attempt there is evicted (it goes back to the queue and resumes from its
// latest checkpoint on healthy nodes); a verdict on a node that other tenants' runs shared while
// it was measured is deferred instead (the node drained: deferred_verdicts.h); nodes the health
// API took out return after passing `uncordon_after_passes` sweeps in a row (0: an operator
// uncordons them), and drained ones after passing their re-measurement. The nodes behind a
// switch a sweep named at fault (fabric_fault.h) are taken out together, with one reason, and
// return together: when every one of them still held by that cordon has passed. Runs that keep
// off a node a sweep passed (after a hang or a straggler move) may go there again at once.

#include <memory>
#include <string>
#include <vector>

#include "healthcheck/anomaly.h"
#include "healthcheck/deferred_verdicts.h"
#include "healthcheck/fabric_fault.h"
#include "healthcheck/health_clients.h"
#include "healthcheck/health_metrics.h"
#include "healthcheck/sweep_neighbours.h"
#include "services/store/health_store.h"
#include "tessera/v1/health.pb.h"

namespace tessera::health {

class Remediation {
 public:
  // `metrics` may be null.
  Remediation(std::shared_ptr<store::HealthStore> store, std::shared_ptr<SchedulerApi> scheduler,
              std::shared_ptr<CordonApi> cordon, std::shared_ptr<RunsApi> runs,
              std::shared_ptr<SweepNeighbours> neighbours,
              std::shared_ptr<DeferredVerdicts> deferred, std::shared_ptr<HealthMetrics> metrics,
              int uncordon_after_passes)
      : store_(std::move(store)),
        scheduler_(std::move(scheduler)),
        cordon_(std::move(cordon)),
        runs_(std::move(runs)),
        neighbours_(std::move(neighbours)),
        deferred_(std::move(deferred)),
        metrics_(std::move(metrics)),
        uncordon_after_passes_(uncordon_after_passes) {}

  // Takes out the anomalous nodes not yet taken out by this sweep, recording them in it; a node
  // that other tenants' runs shared while it was measured is drained instead (sweep_neighbours.h,
  // DeferredVerdicts::Defer). The nodes of each fabric fault go first, together, recorded in
  // the sweep as one finding (Sweep.fabric_faults) and cordoned with one reason naming the
  // switch; unless one of them was taken out or deferred already, or other tenants' runs shared
  // one: then each node's own anomaly goes the usual way.
  void Remediate(v1::Sweep& sweep, const std::vector<Anomaly>& anomalies,
                 const std::vector<NamedFabricFault>& fabric = {});
  // Cordons the node (unless it is already) and evicts its runs.
  void TakeOutOfService(const std::string& node, const std::string& reason,
                        const google::protobuf::Struct& evidence, v1::AttemptEndReason cause,
                        v1::DetectionMethod how);
  // Returns the nodes `finished` passed that the health API took out and that have now passed
  // enough sweeps in a row (or their re-measurement, for drained ones); the nodes of a fabric
  // fault only all together. Runs that keep off a node it passed may go there again
  // (RunsApi::ClearNodeAvoidance): the sweep has decided, sooner than the avoidance's while.
  void ReturnToService(const v1::Sweep& finished);

 private:
  // Takes out a fabric fault's nodes together; false (nothing done) when it is not for this
  // rule (see Remediate).
  bool TakeOutFabric(v1::Sweep& sweep, const NamedFabricFault& fault);
  // The nodes `finished` measured and found nothing on: not condemned, to be measured again,
  // left inconclusive, unmeasured or deferred.
  static std::vector<std::string> PassedBy(const v1::Sweep& finished);

  std::shared_ptr<store::HealthStore> store_;
  std::shared_ptr<SchedulerApi> scheduler_;
  std::shared_ptr<CordonApi> cordon_;
  std::shared_ptr<RunsApi> runs_;
  std::shared_ptr<SweepNeighbours> neighbours_;
  std::shared_ptr<DeferredVerdicts> deferred_;
  std::shared_ptr<HealthMetrics> metrics_;
  const int uncordon_after_passes_;
};

}  // namespace tessera::health
