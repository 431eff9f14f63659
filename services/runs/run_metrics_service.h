#pragma once
// The gRPC adapter of the run manager's progress history: authenticates, forwards, maps the
// status.

#include "services/common/rpc.h"
#include "services/runs/run_manager.h"
#include "tessera/v1/run_metrics.grpc.pb.h"

namespace tessera::runs {

class RunMetricsService final : public v1::RunMetricsService::Service {
 public:
  using Api = v1::RunMetricsService;

  RunMetricsService(std::shared_ptr<RunManager> manager, std::shared_ptr<auth::Authenticator> auth)
      : m_(std::move(manager)), auth_(std::move(auth)) {}

  TESSERA_UNARY_RPC(m_, GetRunMetrics)

 private:
  std::shared_ptr<RunManager> m_;
  std::shared_ptr<auth::Authenticator> auth_;
};

}  // namespace tessera::runs
