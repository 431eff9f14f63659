#pragma once
// The scheduler's part in the health loop: relaying what workers report about the hardware
// (canary results, GPU faults, hung ranks) to the health API, carrying the health API's commands
// to workers, and evicting the runs of a node the health API took out of service. Without a
// health API (or when it cannot take a report), a fatal GPU fault or a hung rank still ends the
// attempt here, so the run moves.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "scheduler/service/attempt_control.h"
#include "scheduler/service/attempt_tracker.h"
#include "scheduler/service/health_client.h"
#include "scheduler/service/worker_registry.h"
#include "services/common/auth/principal.h"
#include "services/common/idempotency.h"
#include "tessera/v1/scheduler.pb.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::scheduler {

class HealthRelay {
 public:
  using Who = auth::Principal;
  // `health` may be null: no health API. `idem` makes EvictNode idempotent by its key.
  HealthRelay(std::shared_ptr<HealthClient> health, std::shared_ptr<WorkerRegistry> workers,
              std::shared_ptr<AttemptTracker> attempts, std::shared_ptr<AttemptControl> control,
              std::shared_ptr<IdempotentCalls> idem);

  // --- from workers' control streams ---
  absl::Status OnHealthResult(const std::string& node, const v1::HealthCheckResult& result);
  absl::Status OnGpuFault(const std::string& node, const v1::GpuFault& fault);
  absl::Status OnRankHang(const std::string& node, const v1::RankHang& hang);

  // --- the SchedulerService calls the health API makes (system callers only) ---
  absl::Status DispatchToWorker(const Who& who, const v1::DispatchToWorkerRequest& req,
                                v1::DispatchToWorkerResponse* resp);
  absl::Status EvictNode(const Who& who, const v1::EvictNodeRequest& req,
                         v1::EvictNodeResponse* resp);

 private:
  std::shared_ptr<HealthClient> health_;
  std::shared_ptr<WorkerRegistry> workers_;
  std::shared_ptr<AttemptTracker> attempts_;
  std::shared_ptr<AttemptControl> control_;
  std::shared_ptr<IdempotentCalls> idem_;
};

}  // namespace tessera::scheduler
