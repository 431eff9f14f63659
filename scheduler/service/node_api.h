#pragma once
// The SchedulerService's inventory and queue calls: nodes (list, get, labels, remove), the queue
// with each waiting run's position and reason, and the submit-time fit check. Reads the
// database only; any instance answers.

#include <memory>

#include "absl/status/status.h"
#include "scheduler/service/run_resizing.h"
#include "scheduler/service/runs_client.h"
#include "scheduler/service/scheduler_config.h"
#include "scheduler/service/team_policy.h"
#include "services/common/auth/principal.h"
#include "services/common/idempotency.h"
#include "services/store/node_store.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::scheduler {

class NodeApi {
 public:
  using Who = auth::Principal;
  // `idem` makes the mutating calls (SetNodeLabels, RemoveNode) idempotent by their key.
  // `teams` (null: no quotas) gives the queue view its quotas and the fit check a run's team;
  // `shrink_after` is the cycle's (SchedulerConfig::shrink_after), so that the queue view places
  // a run that accepts fewer nodes as the next cycle will.
  NodeApi(std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
          std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<TeamPolicy> teams = nullptr,
          std::shared_ptr<Clock> clock = SystemClock::Shared(),
          absl::Duration shrink_after = SchedulerConfig{}.shrink_after);

  absl::Status ListNodes(const Who& who, const v1::ListNodesRequest& req,
                         v1::ListNodesResponse* resp);
  absl::Status GetNode(const Who& who, const v1::GetNodeRequest& req, v1::GetNodeResponse* resp);
  absl::Status SetNodeLabels(const Who& who, const v1::SetNodeLabelsRequest& req,
                             v1::SetNodeLabelsResponse* resp);
  absl::Status RemoveNode(const Who& who, const v1::RemoveNodeRequest& req,
                          v1::RemoveNodeResponse* resp);
  absl::Status GetQueue(const Who& who, const v1::GetQueueRequest& req, v1::GetQueueResponse* resp);
  absl::Status CheckFit(const Who& who, const v1::CheckFitRequest& req, v1::CheckFitResponse* resp);
  // Per cluster: GPUs total, in use, free, cordoned and lost; runs running and queued.
  absl::Status GetUtilization(const Who& who, const v1::GetUtilizationRequest& req,
                              v1::GetUtilizationResponse* resp);

 private:
  absl::Status SetLabels(const v1::SetNodeLabelsRequest& req, v1::SetNodeLabelsResponse* resp);
  absl::Status Remove(const v1::RemoveNodeRequest& req);

  std::shared_ptr<store::NodeStore> nodes_;
  std::shared_ptr<RunsClient> runs_;
  std::shared_ptr<IdempotentCalls> idem_;
  std::shared_ptr<TeamPolicy> teams_;
  std::shared_ptr<Clock> clock_;
  RunResizing resizing_;
};

}  // namespace tessera::scheduler
