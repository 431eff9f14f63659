#include "healthcheck/health_clients.h"

#include <chrono>

#include "services/common/grpc_status.h"

namespace tessera::health {
namespace {

// One call with the key and a deadline on whatever channel the reference holds now.
template <typename Service>
class GrpcCaller {
 public:
  GrpcCaller(std::shared_ptr<ChannelRef> channel, std::string key)
      : channel_(std::move(channel)), key_(std::move(key)) {}

  template <typename Req, typename Resp, typename Method>
  absl::Status Call(Method method, const Req& req, Resp* resp, std::chrono::seconds deadline) {
    auto channel = channel_->Get();
    if (!channel) return absl::UnavailableError("the service is not reachable yet");
    auto stub = Service::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key_);
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    return FromGrpcStatus(((*stub).*method)(&ctx, req, resp));
  }

 private:
  std::shared_ptr<ChannelRef> channel_;
  std::string key_;
};

class GrpcSchedulerApi final : public SchedulerApi {
 public:
  GrpcSchedulerApi(std::shared_ptr<ChannelRef> c, std::string key)
      : caller_(std::move(c), std::move(key)) {}
  absl::StatusOr<std::vector<v1::Node>> ListNodes() override {
    v1::ListNodesRequest req;
    v1::ListNodesResponse resp;
    auto st =
        caller_.Call(&v1::SchedulerService::Stub::ListNodes, req, &resp, std::chrono::seconds(15));
    if (!st.ok()) return st;
    return std::vector<v1::Node>(resp.nodes().begin(), resp.nodes().end());
  }
  absl::Status DispatchToWorker(const v1::DispatchToWorkerRequest& req) override {
    v1::DispatchToWorkerResponse resp;
    const auto wait = std::chrono::seconds(
        static_cast<int64_t>(req.timeout_seconds() > 0 ? req.timeout_seconds() : 10) + 5);
    return caller_.Call(&v1::SchedulerService::Stub::DispatchToWorker, req, &resp, wait);
  }
  absl::StatusOr<std::vector<std::string>> EvictNode(const v1::EvictNodeRequest& req) override {
    v1::EvictNodeResponse resp;
    auto st =
        caller_.Call(&v1::SchedulerService::Stub::EvictNode, req, &resp, std::chrono::seconds(30));
    if (!st.ok()) return st;
    return std::vector<std::string>(resp.run_names().begin(), resp.run_names().end());
  }

 private:
  GrpcCaller<v1::SchedulerService> caller_;
};

class GrpcCordonApi final : public CordonApi {
 public:
  GrpcCordonApi(std::shared_ptr<ChannelRef> c, std::string key)
      : caller_(std::move(c), std::move(key)) {}
  absl::Status Cordon(const std::string& node, const std::string& reason,
                      const google::protobuf::Struct& evidence) override {
    v1::CordonNodeRequest req;
    req.set_node_name(node);
    req.set_reason(reason);
    *req.mutable_evidence() = evidence;
    v1::CordonNodeResponse resp;
    return caller_.Call(&v1::CordonService::Stub::CordonNode, req, &resp, std::chrono::seconds(15));
  }
  absl::Status Uncordon(const std::string& node, const std::string& reason) override {
    v1::UncordonNodeRequest req;
    req.set_node_name(node);
    req.set_reason(reason);
    v1::UncordonNodeResponse resp;
    return caller_.Call(&v1::CordonService::Stub::UncordonNode, req, &resp,
                        std::chrono::seconds(15));
  }

 private:
  GrpcCaller<v1::CordonService> caller_;
};

class GrpcRunsApi final : public RunsApi {
 public:
  GrpcRunsApi(std::shared_ptr<ChannelRef> c, std::string key)
      : caller_(std::move(c), std::move(key)) {}
  absl::StatusOr<std::vector<v1::Run>> ListRunning() override {
    v1::ListRunsRequest req;
    req.mutable_filter()->add_statuses(v1::RUN_STATUS_RUNNING);
    v1::ListRunsResponse resp;
    auto st = caller_.Call(&v1::RunService::Stub::ListRuns, req, &resp, std::chrono::seconds(15));
    if (!st.ok()) return st;
    return std::vector<v1::Run>(resp.runs().begin(), resp.runs().end());
  }

 private:
  GrpcCaller<v1::RunService> caller_;
};

}  // namespace

std::shared_ptr<SchedulerApi> MakeGrpcSchedulerApi(std::shared_ptr<ChannelRef> channel,
                                                   std::string system_key) {
  return std::make_shared<GrpcSchedulerApi>(std::move(channel), std::move(system_key));
}
std::shared_ptr<CordonApi> MakeGrpcCordonApi(std::shared_ptr<ChannelRef> channel,
                                             std::string system_key) {
  return std::make_shared<GrpcCordonApi>(std::move(channel), std::move(system_key));
}
std::shared_ptr<RunsApi> MakeGrpcRunsApi(std::shared_ptr<ChannelRef> channel,
                                         std::string system_key) {
  return std::make_shared<GrpcRunsApi>(std::move(channel), std::move(system_key));
}

}  // namespace tessera::health
