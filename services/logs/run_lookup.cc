#include "services/logs/run_lookup.h"

#include <chrono>

#include "services/common/grpc_status.h"

namespace tessera::logs {
namespace {

class GrpcRunLookup final : public RunLookup {
 public:
  GrpcRunLookup(std::shared_ptr<ChannelRef> channel, std::string key)
      : channel_(std::move(channel)), key_(std::move(key)) {}

  absl::StatusOr<v1::RunDescription> DescribeRun(const std::string& name) override {
    auto channel = channel_->Get();
    if (!channel) return absl::UnavailableError("the run manager is not reachable yet");
    auto stub = v1::RunService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::DescribeRunRequest req;
    req.set_name(name);
    v1::DescribeRunResponse resp;
    if (auto st = FromGrpcStatus(stub->DescribeRun(&ctx, req, &resp)); !st.ok()) return st;
    return resp.description();
  }

 private:
  std::shared_ptr<ChannelRef> channel_;
  std::string key_;
};

}  // namespace

std::shared_ptr<RunLookup> MakeGrpcRunLookup(std::shared_ptr<ChannelRef> channel,
                                             std::string system_key) {
  return std::make_shared<GrpcRunLookup>(std::move(channel), std::move(system_key));
}

}  // namespace tessera::logs
