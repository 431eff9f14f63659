#pragma once
// The scheduler: node inventory and leases, the queue, gang placement through the Placer, and
// the worker side of the control stream. Every dependency comes through the constructor.
//
// The leader runs RunCycle() periodically: admit new runs to the queue, mark nodes whose lease
// expired as lost (ending their attempts as node failures), send stops for runs that are
// terminating, and place queued runs. Worker messages may arrive on any instance that holds
// the worker's stream; only the leader places.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/service/health_client.h"
#include "scheduler/service/runs_client.h"
#include "scheduler/service/worker_registry.h"
#include "services/common/auth/principal.h"
#include "services/common/clock.h"
#include "services/store/node_store.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::scheduler {

// A node label set by `tessera-worker --procs-per-node N`: ranks per node for runs that use no
// GPUs there and do not set compute.procs_per_node.
inline constexpr std::string_view kProcsPerNodeLabel = "tessera.io/procs-per-node";

struct SchedulerConfig {
  // A node whose worker has not heartbeat for this long is lost.
  absl::Duration lease = absl::Seconds(3);
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  // SIGTERM to SIGKILL for stopped ranks.
  absl::Duration stop_grace = absl::Seconds(10);
  // Ports for MASTER_PORT are drawn from [base, base + span).
  int master_port_base = 29500;
  int master_port_span = 10000;
};

struct CycleStats {
  int admitted = 0;
  int lost_nodes = 0;
  int placed = 0;
  int preempted = 0;
  int stops_sent = 0;
};

class SchedulerCore {
 public:
  SchedulerCore(std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
                std::shared_ptr<WorkerRegistry> workers, std::shared_ptr<Clock> clock,
                SchedulerConfig config, std::shared_ptr<HealthClient> health = nullptr);

  // --- the worker control stream ---
  // Registers (or re-registers) the worker's node and returns the lease terms. Attempts the
  // worker reports that the control plane does not run on that node are ordered stopped.
  absl::StatusOr<v1::Registered> RegisterWorker(const v1::RegisterWorker& reg);
  absl::StatusOr<v1::LeaseRenewed> Heartbeat(const std::string& node, const v1::Heartbeat& hb);
  absl::Status OnAttemptUpdate(const std::string& node, const v1::AttemptUpdate& update);
  absl::Status OnProgress(const std::string& node, const v1::ProgressUpdate& progress);
  // What workers report about the hardware goes on to the health API. A hung rank's attempt is
  // ended here when the health API cannot take the report (it normally cordons and evicts).
  absl::Status OnHealthResult(const std::string& node, const v1::HealthCheckResult& result);
  absl::Status OnGpuFault(const std::string& node, const v1::GpuFault& fault);
  absl::Status OnRankHang(const std::string& node, const v1::RankHang& hang);

  // --- the leader's cycle ---
  absl::StatusOr<CycleStats> RunCycle();

  // --- the SchedulerService API ---
  using Who = auth::Principal;
  absl::Status ListNodes(const Who& who, const v1::ListNodesRequest& req,
                         v1::ListNodesResponse* resp);
  absl::Status GetNode(const Who& who, const v1::GetNodeRequest& req, v1::GetNodeResponse* resp);
  absl::Status SetNodeLabels(const Who& who, const v1::SetNodeLabelsRequest& req,
                             v1::SetNodeLabelsResponse* resp);
  absl::Status RemoveNode(const Who& who, const v1::RemoveNodeRequest& req,
                          v1::RemoveNodeResponse* resp);
  absl::Status GetQueue(const Who& who, const v1::GetQueueRequest& req, v1::GetQueueResponse* resp);
  absl::Status CheckFit(const Who& who, const v1::CheckFitRequest& req, v1::CheckFitResponse* resp);
  absl::Status DispatchToWorker(const Who& who, const v1::DispatchToWorkerRequest& req,
                                v1::DispatchToWorkerResponse* resp);
  absl::Status EvictNode(const Who& who, const v1::EvictNodeRequest& req,
                         v1::EvictNodeResponse* resp);
  int64_t placements_total() const;

 private:
  // What this instance knows of an active attempt beyond the database: which nodes reported
  // what. Rebuilt from worker reports after a restart.
  struct AttemptState {
    std::set<std::string> started;
    std::set<std::string> finished;
    std::vector<v1::RankExit> exits;
    int first_failed_rank = -1;
    std::string first_failed_node;
    // Why the control plane stopped it (STOPPED, PREEMPTED); UNSPECIFIED when it did not.
    v1::AttemptEndReason stop_reason = v1::ATTEMPT_END_REASON_UNSPECIFIED;
    absl::Time stop_sent_at = absl::InfinitePast();
  };
  using AttemptKey = std::pair<std::string, int>;
  // An ended attempt whose ranks may still run on some nodes (they were told to stop and have not
  // confirmed). Until they confirm, are lost (and so fenced), or `give_up` passes, their GPUs stay
  // allocated and the run's next attempt is not placed: two attempts of one run never run at
  // once, and a new run never shares a GPU with ranks that are still exiting.
  struct Draining {
    v1::Run run;  // the ended attempt's run, its nodes narrowed to those still draining
    absl::Time give_up;
  };

  void ReconcileFromHeartbeat(const std::string& node, const v1::Heartbeat& hb);
  // Queues PENDING runs, appending them (as the run manager returns them) to `queued`.
  absl::Status AdmitPending(const std::vector<v1::Run>& pending, CycleStats& stats,
                            std::vector<v1::Run>& queued);
  // Marks nodes whose lease expired LOST (updating `nodes`), ends their attempts, and appends
  // the runs that went back to the queue to `queued`.
  absl::Status ExpireLeases(std::vector<v1::Node>& nodes, const std::vector<v1::Run>& active,
                            CycleStats& stats, std::vector<v1::Run>& queued);
  void SendStops(const std::vector<v1::Run>& active, CycleStats& stats);
  absl::Status Place(const std::vector<v1::Run>& queued, const std::vector<v1::Run>& active,
                     const std::vector<v1::Node>& nodes, CycleStats& stats);
  void StopAttemptOn(const v1::Run& run, v1::AttemptEndReason why, const std::string& reason);
  v1::ControlMessage StartMessage(const v1::Run& run, const v1::Attempt& attempt,
                                  const v1::AttemptNode& node, int world_size, int local_size,
                                  int first_rank);
  absl::Status EndAttempt(const std::string& run_id, int resumption, const AttemptState& state,
                          v1::AttemptEndReason reason, v1::DetectionMethod how,
                          const std::string& detail, v1::Run* result = nullptr);
  std::string NextCommandId();
  // Ends every active attempt with ranks on `node` for `reason`; returns the runs' names.
  absl::StatusOr<std::vector<std::string>> EndAttemptsOnNode(const std::string& node,
                                                             v1::AttemptEndReason reason,
                                                             v1::DetectionMethod how,
                                                             const std::string& detail,
                                                             const std::string& only_run_id = "");
  // Bookkeeping of draining_: a node reported the attempt's ranks gone; a node was lost.
  void NodeDrained(const std::string& run_id, int resumption, const std::string& node);
  void NodeLostWhileDraining(const std::string& node);

  std::shared_ptr<store::NodeStore> nodes_;
  std::shared_ptr<RunsClient> runs_;
  std::shared_ptr<WorkerRegistry> workers_;
  std::shared_ptr<Clock> clock_;
  const SchedulerConfig config_;
  std::shared_ptr<HealthClient> health_;  // may be null: no health API

  mutable absl::Mutex mu_;
  std::map<AttemptKey, AttemptState> attempts_ ABSL_GUARDED_BY(mu_);
  // Active runs by id, with the nodes of their current attempt, from the last cycle.
  std::map<std::string, v1::Run> active_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Draining> draining_ ABSL_GUARDED_BY(mu_);
  int64_t placements_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_command_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace tessera::scheduler
