#pragma once
// The worker side of the control stream: registration, heartbeats (each renews the node's lease
// in the leader's memory, never in the database, and reconciles what the worker's ranks are
// doing), and the worker's reports on attempts (its training progress goes through
// ProgressRelay). Any scheduler instance that holds a worker's stream handles its messages.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "scheduler/service/attempt_control.h"
#include "scheduler/service/attempt_tracker.h"
#include "scheduler/service/cluster_metrics.h"
#include "scheduler/service/desired_attempts.h"
#include "scheduler/service/lease_table.h"
#include "scheduler/service/runs_client.h"
#include "scheduler/service/scheduler_config.h"
#include "services/store/join_token_store.h"
#include "services/store/node_store.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::scheduler {

class WorkerSessions {
 public:
  WorkerSessions(std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
                 std::shared_ptr<AttemptTracker> attempts, std::shared_ptr<AttemptControl> control,
                 std::shared_ptr<LeaseTable> leases, std::shared_ptr<DesiredAttempts> desired,
                 std::shared_ptr<Clock> clock, SchedulerConfig config,
                 std::shared_ptr<SchedulerMetrics> metrics = nullptr,
                 std::shared_ptr<store::JoinTokenStore> join_tokens = nullptr);

  // Registers (or re-registers) the worker's node and returns the lease terms. Attempts the
  // worker reports that the control plane does not run on that node are ordered stopped. The node
  // is held to `key_terms`, the terms of the node key it called with (v1::NodeTerms; a key made
  // by a join before keys carried terms: its join token's): PERMISSION_DENIED for another
  // cluster, GPU type or more GPUs than they allow; their labels replace its own. With
  // SchedulerConfig::require_node_terms, terms that leave the cluster or GPU type open are
  // PERMISSION_DENIED too. A node declared lost before its fence fired, whose worker still runs
  // ranks or prepares an attempt, is UNAVAILABLE until that fence has (they die by then; the
  // worker tries again): its GPUs are never offered while ranks of an ended attempt hold them.
  absl::StatusOr<v1::Registered> RegisterWorker(const v1::RegisterWorker& reg,
                                                const v1::NodeTerms& key_terms = v1::NodeTerms());
  // Renews the node's lease; FAILED_PRECONDITION when the node was declared lost meanwhile or
  // holds no lease here (the worker has fenced itself and must register again).
  absl::StatusOr<v1::LeaseRenewed> Heartbeat(const std::string& node, const v1::Heartbeat& hb);
  absl::Status OnAttemptUpdate(const std::string& node, const v1::AttemptUpdate& update);

 private:
  // `node` as its terms allow (`key_terms`, or those of the join token it used last when its key
  // has none); returns those terms (empty when neither has any).
  absl::StatusOr<v1::NodeTerms> HoldToTerms(v1::Node& node, const v1::NodeTerms& key_terms);
  // The terms the node is held to and what set them ("its key K", "join token T").
  absl::StatusOr<std::pair<v1::NodeTerms, std::string>> TermsOf(const std::string& node,
                                                                const v1::NodeTerms& key_terms);
  // Saves the registration; what `terms` leave open must be what the node said first.
  absl::Status SaveRegistration(const v1::RegisterWorker& reg, const v1::NodeTerms& terms,
                                v1::Registered& out);
  absl::Status StopOrphans(const v1::RegisterWorker& reg);
  // UNAVAILABLE while ranks the worker started before its node was declared lost may run.
  absl::Status RefuseUnfenced(const v1::RegisterWorker& reg) const;
  // Recovers the reports this instance missed (it restarted, or took over from another) from
  // what the heartbeat says the worker's ranks are doing.
  // Also sends again the stops and starts the worker evidently did not get (desired_attempts.h).
  void ReconcileFromHeartbeat(const std::string& node, const v1::Heartbeat& hb);
  void ResendStarts(const std::string& node, const v1::Heartbeat& hb);
  // What the attempt's end is once its books say every node has finished.
  absl::Status FinishIfDone(const std::string& node, const v1::AttemptUpdate& update,
                            const AttemptReport& report);

  std::shared_ptr<store::NodeStore> nodes_;
  std::shared_ptr<RunsClient> runs_;
  std::shared_ptr<AttemptTracker> attempts_;
  std::shared_ptr<AttemptControl> control_;
  std::shared_ptr<LeaseTable> leases_;
  std::shared_ptr<DesiredAttempts> desired_;
  std::shared_ptr<Clock> clock_;
  const SchedulerConfig config_;
  std::shared_ptr<SchedulerMetrics> metrics_;           // null: none kept
  std::shared_ptr<store::JoinTokenStore> join_tokens_;  // null: nodes' own word (tests)
};

}  // namespace tessera::scheduler
