#pragma once
// Drives each running sweep through its stages: compute stress on every node (nodes sharing a
// machine take turns, twice), then all-reduce on neighbouring pairs, then the confirmation of
// suspects (nodes that looked slow are measured again in turn with peers until a sequential
// test decides: confirmation.h). A stage ends when its results are in or its deadline passed
// (the missing ones are recorded as timeouts). A finished sweep's anomalies go to Remediation;
// nodes it left inconclusive or found slow once are measured again by one follow-up sweep.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/random.h"
#include "healthcheck/anomaly.h"
#include "healthcheck/confirmation.h"
#include "healthcheck/fabric_fault.h"
#include "healthcheck/health_clients.h"
#include "healthcheck/health_config.h"
#include "healthcheck/health_metrics.h"
#include "healthcheck/remediation.h"
#include "healthcheck/sweep_launcher.h"
#include "healthcheck/sweep_neighbours.h"
#include "services/store/health_store.h"
#include "tessera/v1/health.pb.h"

namespace tessera::health {

class SweepDriver {
 public:
  // `metrics` may be null.
  SweepDriver(std::shared_ptr<store::HealthStore> store, std::shared_ptr<SchedulerApi> scheduler,
              std::shared_ptr<Clock> clock, std::shared_ptr<Random> random, HealthConfig config,
              std::shared_ptr<SweepNeighbours> neighbours, std::shared_ptr<SweepLauncher> launcher,
              std::shared_ptr<Remediation> remediation, std::shared_ptr<HealthMetrics> metrics)
      : store_(std::move(store)),
        scheduler_(std::move(scheduler)),
        clock_(std::move(clock)),
        random_(std::move(random)),
        config_(std::move(config)),
        neighbours_(std::move(neighbours)),
        launcher_(std::move(launcher)),
        remediation_(std::move(remediation)),
        metrics_(std::move(metrics)) {}

  // Advances every running sweep among the newest; returns those sweeps as read (before this
  // step), or why they could not be read.
  absl::StatusOr<std::vector<v1::Sweep>> AdvanceRunning();

 private:
  void AdvanceSweep(v1::Sweep sweep);
  void Dispatch(v1::Sweep& sweep, const std::vector<CanaryDispatch>& dispatches);
  // Records a TIMEOUT for every member of `groups` with fewer than `pass` results of `kind`.
  void RecordTimeouts(const v1::Sweep& sweep, v1::HealthCheckKind kind,
                      const std::vector<std::vector<std::string>>& groups, int pass,
                      std::vector<v1::HealthCheckResult>& results);
  // The sweep's confirmation of its suspects (confirmation.h), from its results so far; a
  // follow-up sweep's carries on with what the sweep it follows left inconclusive.
  ConfirmationPlan PlanFor(const v1::Sweep& sweep,
                           const std::vector<v1::HealthCheckResult>& results) const;
  // The plan a finished sweep ended with (cached: it no longer changes); empty if it cannot be
  // read.
  std::optional<ConfirmationPlan> FinishedPlan(const std::string& sweep_id) const;
  void AdvanceConfirmation(v1::Sweep& sweep, std::vector<v1::HealthCheckResult>& results, int step,
                           int fixed_stages);
  // `plan`: the confirmation as the results leave it (suspects decided, or out of steps).
  void FinishSweep(v1::Sweep& sweep, const std::vector<v1::HealthCheckResult>& results,
                   const ConfirmationPlan& plan);
  // Lists the nodes `results` could not reach (and `anomalies` do not condemn) as inconclusive,
  // each with a "not measured" finding.
  static void RecordUnmeasured(v1::Sweep& sweep, const std::vector<v1::HealthCheckResult>& results,
                               const std::vector<Anomaly>& anomalies);
  // The switches (or racks) the finished sweep's all-reduce pairs name at fault (fabric_fault.h);
  // nodes condemned or found slow by compute stress are not the fabric's.
  std::vector<NamedFabricFault> FabricFaults(const std::vector<std::string>& nodes,
                                             const std::vector<v1::HealthCheckResult>& results,
                                             const ConfirmationVerdicts& verdicts) const;
  // A sweep that left nodes inconclusive (or found slow once) starts one follow-up sweep of the
  // same nodes.
  void FollowUp(v1::Sweep& finished);

  std::shared_ptr<store::HealthStore> store_;
  std::shared_ptr<SchedulerApi> scheduler_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Random> random_;  // canary ports
  const HealthConfig config_;
  std::shared_ptr<SweepNeighbours> neighbours_;
  std::shared_ptr<SweepLauncher> launcher_;
  std::shared_ptr<Remediation> remediation_;
  std::shared_ptr<HealthMetrics> metrics_;

  mutable absl::Mutex plans_mu_;
  mutable std::map<std::string, ConfirmationPlan> finished_plans_ ABSL_GUARDED_BY(plans_mu_);
};

}  // namespace tessera::health
