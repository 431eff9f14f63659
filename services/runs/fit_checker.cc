#include "services/runs/fit_checker.h"

#include <chrono>

#include "services/common/grpc_status.h"

namespace tessera::runs {
namespace {

class GrpcFitChecker final : public FitChecker {
 public:
  GrpcFitChecker(std::shared_ptr<ChannelRef> channel, std::string key)
      : channel_(std::move(channel)), key_(std::move(key)) {}

  absl::Status CheckFit(const v1::ComputeSpec& compute) override {
    auto stub = Stub();
    if (!stub) return absl::UnavailableError("the service is not reachable yet");
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::CheckFitRequest req;
    *req.mutable_compute() = compute;
    v1::CheckFitResponse resp;
    return FromGrpcStatus(stub->CheckFit(&ctx, req, &resp));
  }

 private:
  std::shared_ptr<ChannelRef> channel_;
  std::unique_ptr<v1::SchedulerService::Stub> Stub() {
    auto channel = channel_->Get();
    return channel ? v1::SchedulerService::NewStub(channel) : nullptr;
  }
  std::string key_;
};

}  // namespace

std::shared_ptr<FitChecker> MakeGrpcFitChecker(std::shared_ptr<ChannelRef> channel,
                                               std::string system_key) {
  return std::make_shared<GrpcFitChecker>(std::move(channel), std::move(system_key));
}

}  // namespace tessera::runs
