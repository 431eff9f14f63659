#pragma once
// The HealthService's RPCs: sweeps asked for and read, canary results, GPU faults and hung ranks
// reported by the services, fault injection. A fatal GPU fault takes its node out of service at
// once; a hung rank requeues its run and has its node swept beside idle peers. The sweeps'
// progress is the SweepDriver's (health.h wires the roles).

#include <memory>

#include "absl/status/status.h"
#include "base/clock.h"
#include "healthcheck/health_clients.h"
#include "healthcheck/health_config.h"
#include "healthcheck/remediation.h"
#include "healthcheck/sweep_launcher.h"
#include "services/common/auth/principal.h"
#include "services/common/idempotency.h"
#include "services/store/health_store.h"
#include "tessera/v1/health.pb.h"

namespace tessera::health {

class HealthHandler {
 public:
  HealthHandler(std::shared_ptr<store::HealthStore> store, std::shared_ptr<SchedulerApi> scheduler,
                std::shared_ptr<RunsApi> runs, std::shared_ptr<IdempotentCalls> idem,
                std::shared_ptr<Clock> clock, std::shared_ptr<SweepLauncher> launcher,
                std::shared_ptr<Remediation> remediation, HealthConfig config)
      : store_(std::move(store)),
        scheduler_(std::move(scheduler)),
        runs_(std::move(runs)),
        idem_(std::move(idem)),
        clock_(std::move(clock)),
        launcher_(std::move(launcher)),
        remediation_(std::move(remediation)),
        config_(std::move(config)) {}

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

 private:
  std::shared_ptr<store::HealthStore> store_;
  std::shared_ptr<SchedulerApi> scheduler_;
  std::shared_ptr<RunsApi> runs_;
  std::shared_ptr<IdempotentCalls> idem_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<SweepLauncher> launcher_;
  std::shared_ptr<Remediation> remediation_;
  const HealthConfig config_;
};

}  // namespace tessera::health
