#pragma once
// The gRPC adapter of the health API.

#include "healthcheck/health_handler.h"
#include "services/common/rpc.h"
#include "tessera/v1/health.grpc.pb.h"

namespace tessera::health {

class HealthService final : public v1::HealthService::Service {
 public:
  using Api = v1::HealthService;

  HealthService(std::shared_ptr<HealthHandler> handler, std::shared_ptr<auth::Authenticator> auth)
      : handler_(std::move(handler)), auth_(std::move(auth)) {}

  TESSERA_UNARY_RPC(handler_, StartSweep)
  TESSERA_UNARY_RPC(handler_, GetSweep)
  TESSERA_UNARY_RPC(handler_, ListSweeps)
  TESSERA_UNARY_RPC(handler_, ListHealthResults)
  TESSERA_UNARY_RPC(handler_, ReportHealthResult)
  TESSERA_UNARY_RPC(handler_, ReportGpuFault)
  TESSERA_UNARY_RPC(handler_, ReportRankHang)
  TESSERA_UNARY_RPC(handler_, InjectFault)

 private:
  std::shared_ptr<HealthHandler> handler_;
  std::shared_ptr<auth::Authenticator> auth_;
};

}  // namespace tessera::health
