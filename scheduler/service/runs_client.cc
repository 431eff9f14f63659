#include "scheduler/service/runs_client.h"

#include <chrono>

#include "services/common/grpc_status.h"

namespace tessera::scheduler {
namespace {

class GrpcRunsClient final : public RunsClient {
 public:
  GrpcRunsClient(std::shared_ptr<ChannelRef> channel, std::string key)
      : channel_(std::move(channel)), key_(std::move(key)) {}

  absl::StatusOr<std::vector<v1::Run>> ListRuns(
      const std::vector<v1::RunStatus>& statuses) override {
    auto stub = Stub();
    if (!stub) return absl::UnavailableError("the service is not reachable yet");
    grpc::ClientContext ctx;
    Prepare(ctx);
    v1::ListRunsRequest req;
    for (auto s : statuses) req.mutable_filter()->add_statuses(s);
    v1::ListRunsResponse resp;
    if (auto st = FromGrpcStatus(stub->ListRuns(&ctx, req, &resp)); !st.ok()) return st;
    return std::vector<v1::Run>(resp.runs().begin(), resp.runs().end());
  }

  absl::StatusOr<v1::Run> RecordAttempt(const v1::Attempt& attempt) override {
    auto stub = Stub();
    if (!stub) return absl::UnavailableError("the service is not reachable yet");
    grpc::ClientContext ctx;
    Prepare(ctx);
    v1::RecordAttemptRequest req;
    *req.mutable_attempt() = attempt;
    v1::RecordAttemptResponse resp;
    if (auto st = FromGrpcStatus(stub->RecordAttempt(&ctx, req, &resp)); !st.ok()) return st;
    return resp.run();
  }

  absl::Status ReportProgress(const v1::ReportProgressRequest& request) override {
    auto stub = Stub();
    if (!stub) return absl::UnavailableError("the service is not reachable yet");
    grpc::ClientContext ctx;
    Prepare(ctx);
    v1::ReportProgressResponse resp;
    return FromGrpcStatus(stub->ReportProgress(&ctx, request, &resp));
  }

 private:
  void Prepare(grpc::ClientContext& ctx) {
    ctx.AddMetadata("authorization", "Bearer " + key_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }
  std::shared_ptr<ChannelRef> channel_;
  std::unique_ptr<v1::RunService::Stub> Stub() {
    auto channel = channel_->Get();
    return channel ? v1::RunService::NewStub(channel) : nullptr;
  }
  std::string key_;
};

}  // namespace

std::shared_ptr<RunsClient> MakeGrpcRunsClient(std::shared_ptr<ChannelRef> channel,
                                               std::string system_key) {
  return std::make_shared<GrpcRunsClient>(std::move(channel), std::move(system_key));
}

}  // namespace tessera::scheduler
