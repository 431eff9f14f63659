#pragma once
// The health API (HealthService): canary sweeps, GPU probe reports, hang reports, fault
// injection, and remediation. Every dependency comes through the constructor.
//
// A sweep is created by StartSweep (on demand), on a schedule, or by the run watch (a run's MFU
// under its threshold, a straggling node). Tick() — called every few hundred milliseconds by the
// component's thread — drives each running sweep through its phases (compute stress on every
// node, then all-reduce on neighbouring pairs, then the confirmation of suspects: nodes that
// looked slow are measured again in turn with peers until a sequential test decides), fills in
// what did not come back as timeouts, finds the anomalous nodes (anomaly.h) and remediates: the
// node is cordoned with the evidence, and any run with an attempt there is evicted — it goes back
// to the queue and resumes from its latest checkpoint on healthy nodes. A fatal GPU fault or a hung
// rank does the same at once. Nodes cordoned by the health API return after an operator uncordons
// them, or after passing `uncordon_after_passes` sweeps in a row when that is set.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/random.h"
#include "healthcheck/anomaly.h"
#include "healthcheck/deferred_verdicts.h"
#include "healthcheck/health_clients.h"
#include "healthcheck/health_metrics.h"
#include "healthcheck/run_watch.h"
#include "healthcheck/sweep_neighbours.h"
#include "healthcheck/sweep_plan.h"
#include "services/common/auth/principal.h"
#include "services/common/idempotency.h"
#include "services/store/health_store.h"
#include "tessera/v1/health.grpc.pb.h"

namespace tessera::health {

struct HealthConfig {
  CanaryConfig canary;
  AnomalyConfig anomaly;
  RunWatchConfig watch;
  // Sweeps of the idle nodes on a schedule; zero: none.
  absl::Duration sweep_interval = absl::ZeroDuration();
  // A node the health API cordoned returns after this many passing sweeps in a row; 0: never
  // (an operator uncordons it).
  int uncordon_after_passes = 0;
  // Idle nodes added to a run-triggered sweep, for peers to compare with.
  int max_peers = 8;
  int port_base = 39000;
  int port_span = 2000;
  absl::Duration dispatch_timeout = absl::Seconds(5);
  absl::Duration run_watch_interval = absl::Seconds(1);
  // How often the nodes drained on a deferred verdict are looked at (a list of every node):
  // those idle now are swept again.
  absl::Duration remeasure_interval = absl::Seconds(10);
};

class HealthHandler {
 public:
  HealthHandler(std::shared_ptr<store::HealthStore> store, std::shared_ptr<SchedulerApi> scheduler,
                std::shared_ptr<CordonApi> cordon, std::shared_ptr<RunsApi> runs,
                std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<Clock> clock,
                std::shared_ptr<Random> random, HealthConfig config,
                metrics::Registry* registry = nullptr);

  using Who = auth::Principal;
  absl::Status StartSweep(const Who& who, const v1::StartSweepRequest& req,
                          v1::StartSweepResponse* resp);
  absl::Status GetSweep(const Who& who, const v1::GetSweepRequest& req, v1::GetSweepResponse* resp);
  absl::Status ListSweeps(const Who& who, const v1::ListSweepsRequest& req,
                          v1::ListSweepsResponse* resp);
  absl::Status ListHealthResults(const Who& who, const v1::ListHealthResultsRequest& req,
                                 v1::ListHealthResultsResponse* resp);
  absl::Status ReportHealthResult(const Who& who, const v1::ReportHealthResultRequest& req,
                                  v1::ReportHealthResultResponse* resp);
  absl::Status ReportGpuFault(const Who& who, const v1::ReportGpuFaultRequest& req,
                              v1::ReportGpuFaultResponse* resp);
  absl::Status ReportRankHang(const Who& who, const v1::ReportRankHangRequest& req,
                              v1::ReportRankHangResponse* resp);
  absl::Status InjectFault(const Who& who, const v1::InjectFaultRequest& req,
                           v1::InjectFaultResponse* resp);

  // Drives sweeps, scheduled sweeps and the run watch. Never blocks an RPC.
  void Tick();

  // A sweep of `nodes` (all ready nodes when empty), RUNNING and not yet dispatched.
  absl::StatusOr<v1::Sweep> CreateSweep(v1::SweepTrigger trigger, std::vector<std::string> nodes,
                                        const std::string& requested_by,
                                        const std::string& run_name,
                                        const std::string& suspect_node,
                                        const std::string& trigger_detail = "");

 private:
  void AdvanceSweep(v1::Sweep sweep);
  void Dispatch(v1::Sweep& sweep, const std::vector<CanaryDispatch>& dispatches);
  // `plan`: the confirmation as the results leave it (suspects decided, or out of steps).
  void FinishSweep(v1::Sweep& sweep, const std::vector<v1::HealthCheckResult>& results,
                   const ConfirmationPlan& plan);
  // The sweep's confirmation of its suspects (confirmation.h), from its results so far; a
  // follow-up sweep's carries on with what the sweep it follows left inconclusive.
  ConfirmationPlan PlanFor(const v1::Sweep& sweep,
                           const std::vector<v1::HealthCheckResult>& results) const;
  // The plan a finished sweep ended with (cached: it no longer changes); empty if it cannot be
  // read.
  std::optional<ConfirmationPlan> FinishedPlan(const std::string& sweep_id) const;
  void AdvanceConfirmation(v1::Sweep& sweep, std::vector<v1::HealthCheckResult>& results, int step,
                           int fixed_stages);
  // A sweep that left nodes inconclusive starts one follow-up sweep of the same nodes.
  void FollowUp(v1::Sweep& finished);
  // Takes out the anomalous nodes not yet taken out by this sweep, recording them in it; a node
  // that other tenants' runs shared while it was measured is drained instead (sweep_neighbours.h,
  // DeferredVerdicts::Defer).
  void Remediate(v1::Sweep& sweep, const std::vector<Anomaly>& anomalies);
  // Drained nodes whose verdict was deferred are swept again, with idle peers, once nothing runs
  // on them (DeferredVerdicts::Remeasure, every remeasure_interval).
  void RemeasureDrained(const std::vector<v1::Sweep>& running_sweeps);
  // Cordons the node (unless it is already) and evicts its runs.
  void TakeOutOfService(const std::string& node, const std::string& reason,
                        const google::protobuf::Struct& evidence, v1::AttemptEndReason cause,
                        v1::DetectionMethod how);
  void MaybeReturnToService(const v1::Sweep& sweep);
  // Whether the periodic work whose next time is `next` is due now; if so, it is next due
  // `every` from now.
  bool Due(absl::Time& next, absl::Duration every);
  void WatchRuns();
  void ScheduleSweeps();
  // Records a TIMEOUT for every member of `groups` with fewer than `pass` results of `kind`.
  void RecordTimeouts(const v1::Sweep& sweep, v1::HealthCheckKind kind,
                      const std::vector<std::vector<std::string>>& groups, int pass,
                      std::vector<v1::HealthCheckResult>& results);
  absl::StatusOr<std::map<std::string, v1::Node>> NodesByName();
  std::string NewSweepId();

  std::shared_ptr<store::HealthStore> store_;
  std::shared_ptr<SchedulerApi> scheduler_;
  std::shared_ptr<CordonApi> cordon_;
  std::shared_ptr<RunsApi> runs_;
  std::shared_ptr<IdempotentCalls> idem_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Random> random_;  // sweep ids, canary ports
  const HealthConfig config_;
  std::unique_ptr<HealthMetrics> metrics_;  // null: no metrics

  absl::Mutex mu_;  // the run watch and the tick's schedule
  RunWatch watch_ ABSL_GUARDED_BY(mu_);
  absl::Time next_watch_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_scheduled_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_remeasure_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  SweepNeighbours neighbours_;
  DeferredVerdicts deferred_;
  absl::Mutex tick_mu_;  // one Tick at a time
  mutable absl::Mutex plans_mu_;
  mutable std::map<std::string, ConfirmationPlan> finished_plans_ ABSL_GUARDED_BY(plans_mu_);
};

}  // namespace tessera::health
