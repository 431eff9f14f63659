#include "services/runs/log_deleter.h"

#include <chrono>

#include "services/common/grpc_status.h"
#include "tessera/v1/logs.grpc.pb.h"

namespace tessera::runs {
namespace {

class GrpcLogDeleter final : public LogDeleter {
 public:
  GrpcLogDeleter(std::shared_ptr<ChannelRef> channel, std::string key)
      : channel_(std::move(channel)), key_(std::move(key)) {}

  absl::Status DeleteRunLogs(const std::string& run_id) override {
    auto channel = channel_->Get();
    if (!channel) return absl::UnavailableError("the log service is not reachable yet");
    auto stub = v1::LogService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::DeleteRunLogsRequest req;
    req.set_idempotency_key("delete-logs-" + run_id);
    req.set_run_id(run_id);
    v1::DeleteRunLogsResponse resp;
    return FromGrpcStatus(stub->DeleteRunLogs(&ctx, req, &resp));
  }

 private:
  std::shared_ptr<ChannelRef> channel_;
  std::string key_;
};

}  // namespace

std::shared_ptr<LogDeleter> MakeGrpcLogDeleter(std::shared_ptr<ChannelRef> channel,
                                               std::string system_key) {
  return std::make_shared<GrpcLogDeleter>(std::move(channel), std::move(system_key));
}

}  // namespace tessera::runs
