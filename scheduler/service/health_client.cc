#include "scheduler/service/health_client.h"

#include "absl/strings/str_cat.h"
#include "tessera/v1/health.grpc.pb.h"

namespace tessera::scheduler {
namespace {

class GrpcHealthClient final : public HealthClient {
 public:
  GrpcHealthClient(std::shared_ptr<ChannelRef> channel, SystemCredential key,
                   ServiceClientOptions options)
      : health_(std::move(channel), std::move(key), "the health API", options) {}

  absl::Status ReportHealthResult(const v1::HealthCheckResult& result) override {
    v1::ReportHealthResultRequest req;
    req.set_idempotency_key(absl::StrCat("result/", result.sweep_id(), "/", result.node_name(), "/",
                                         result.kind(), "/", result.started_at().seconds(), ".",
                                         result.started_at().nanos()));
    *req.mutable_result() = result;
    v1::ReportHealthResultResponse resp;
    return health_.Call(&v1::HealthService::Stub::ReportHealthResult, req, &resp);
  }
  absl::Status ReportGpuFault(const v1::GpuFault& fault) override {
    v1::ReportGpuFaultRequest req;
    *req.mutable_fault() = fault;
    v1::ReportGpuFaultResponse resp;
    return health_.Call(&v1::HealthService::Stub::ReportGpuFault, req, &resp);
  }
  absl::Status ReportRankHang(const v1::ReportRankHangRequest& req) override {
    v1::ReportRankHangResponse resp;
    return health_.Call(&v1::HealthService::Stub::ReportRankHang, req, &resp);
  }

 private:
  SystemClient<v1::HealthService> health_;
};

}  // namespace

std::shared_ptr<HealthClient> MakeGrpcHealthClient(std::shared_ptr<ChannelRef> channel,
                                                   SystemCredential system_key,
                                                   ServiceClientOptions options) {
  return std::make_shared<GrpcHealthClient>(std::move(channel), std::move(system_key), options);
}

}  // namespace tessera::scheduler
