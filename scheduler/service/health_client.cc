#include "scheduler/service/health_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"

namespace tessera::scheduler {
namespace {

class GrpcHealthClient final : public HealthClient {
 public:
  GrpcHealthClient(std::shared_ptr<ChannelRef> channel, std::string key)
      : channel_(std::move(channel)), key_(std::move(key)) {}

  absl::Status ReportHealthResult(const v1::HealthCheckResult& result) override {
    v1::ReportHealthResultRequest req;
    req.set_idempotency_key(absl::StrCat("result/", result.sweep_id(), "/", result.node_name(), "/",
                                         result.kind(), "/", result.started_at().seconds(), ".",
                                         result.started_at().nanos()));
    *req.mutable_result() = result;
    v1::ReportHealthResultResponse resp;
    return Call(&v1::HealthService::Stub::ReportHealthResult, req, &resp);
  }
  absl::Status ReportGpuFault(const v1::GpuFault& fault) override {
    v1::ReportGpuFaultRequest req;
    *req.mutable_fault() = fault;
    v1::ReportGpuFaultResponse resp;
    return Call(&v1::HealthService::Stub::ReportGpuFault, req, &resp);
  }
  absl::Status ReportRankHang(const v1::ReportRankHangRequest& req) override {
    v1::ReportRankHangResponse resp;
    return Call(&v1::HealthService::Stub::ReportRankHang, req, &resp);
  }

 private:
  template <typename Req, typename Resp>
  absl::Status Call(grpc::Status (v1::HealthService::Stub::*method)(grpc::ClientContext*,
                                                                    const Req&, Resp*),
                    const Req& req, Resp* resp) {
    auto channel = channel_->Get();
    if (!channel) return absl::UnavailableError("the health API is not reachable yet");
    auto stub = v1::HealthService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
    return FromGrpcStatus(((*stub).*method)(&ctx, req, resp));
  }
  std::shared_ptr<ChannelRef> channel_;
  std::string key_;
};

}  // namespace

std::shared_ptr<HealthClient> MakeGrpcHealthClient(std::shared_ptr<ChannelRef> channel,
                                                   std::string system_key) {
  return std::make_shared<GrpcHealthClient>(std::move(channel), std::move(system_key));
}

}  // namespace tessera::scheduler
