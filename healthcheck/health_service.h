#pragma once
// The gRPC adapter of the health API.

#include "healthcheck/health_handler.h"
#include "services/common/rpc.h"

namespace tessera::health {

class HealthService final : public v1::HealthService::Service {
 public:
  HealthService(std::shared_ptr<HealthHandler> handler, std::shared_ptr<auth::Authenticator> auth)
      : handler_(std::move(handler)), auth_(std::move(auth)) {}

#define TESSERA_HEALTH_RPC(Method)                                                               \
  grpc::Status Method(grpc::ServerContext* ctx, const v1::Method##Request* req,                  \
                      v1::Method##Response* resp) override {                                     \
    return Serve(*auth_, ctx,                                                                    \
                 [&](const auth::Principal& who) { return handler_->Method(who, *req, resp); }); \
  }
  TESSERA_HEALTH_RPC(StartSweep)
  TESSERA_HEALTH_RPC(GetSweep)
  TESSERA_HEALTH_RPC(ListSweeps)
  TESSERA_HEALTH_RPC(ListHealthResults)
  TESSERA_HEALTH_RPC(ReportHealthResult)
  TESSERA_HEALTH_RPC(ReportGpuFault)
  TESSERA_HEALTH_RPC(ReportRankHang)
  TESSERA_HEALTH_RPC(InjectFault)
#undef TESSERA_HEALTH_RPC

 private:
  std::shared_ptr<HealthHandler> handler_;
  std::shared_ptr<auth::Authenticator> auth_;
};

}  // namespace tessera::health
