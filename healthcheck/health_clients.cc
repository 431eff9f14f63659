#include "healthcheck/health_clients.h"

#include <algorithm>

#include "base/timestamps.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::health {
namespace {

class GrpcSchedulerApi final : public SchedulerApi {
 public:
  GrpcSchedulerApi(std::shared_ptr<ChannelRef> c, SystemCredential key,
                   ServiceClientOptions options)
      : scheduler_(std::move(c), std::move(key), "the scheduler", options) {}
  absl::StatusOr<std::vector<v1::Node>> ListNodes() override {
    v1::ListNodesRequest req;
    v1::ListNodesResponse resp;
    auto st = scheduler_.Call(&v1::SchedulerService::Stub::ListNodes, req, &resp);
    if (!st.ok()) return st;
    return std::vector<v1::Node>(resp.nodes().begin(), resp.nodes().end());
  }
  absl::Status DispatchToWorker(const v1::DispatchToWorkerRequest& req) override {
    v1::DispatchToWorkerResponse resp;
    const absl::Duration wait = absl::Seconds(
        static_cast<int64_t>(req.timeout_seconds() > 0 ? req.timeout_seconds() : 10) + 5);
    return scheduler_.Call(&v1::SchedulerService::Stub::DispatchToWorker, req, &resp, wait);
  }
  absl::StatusOr<std::vector<std::string>> EvictNode(const v1::EvictNodeRequest& req) override {
    v1::EvictNodeResponse resp;
    const absl::Duration wait = std::max(scheduler_.options().deadline, absl::Seconds(30));
    auto st = scheduler_.Call(&v1::SchedulerService::Stub::EvictNode, req, &resp, wait);
    if (!st.ok()) return st;
    return std::vector<std::string>(resp.run_names().begin(), resp.run_names().end());
  }

 private:
  SystemClient<v1::SchedulerService> scheduler_;
};

class GrpcCordonApi final : public CordonApi {
 public:
  GrpcCordonApi(std::shared_ptr<ChannelRef> c, SystemCredential key, ServiceClientOptions options)
      : cordon_(std::move(c), std::move(key), "the cordon service", options) {}
  absl::Status Cordon(const std::string& node, const std::string& reason,
                      const google::protobuf::Struct& evidence) override {
    v1::CordonNodeRequest req;
    req.set_node_name(node);
    req.set_reason(reason);
    *req.mutable_evidence() = evidence;
    v1::CordonNodeResponse resp;
    return cordon_.Call(&v1::CordonService::Stub::CordonNode, req, &resp);
  }
  absl::Status Uncordon(const std::string& node, const std::string& reason) override {
    v1::UncordonNodeRequest req;
    req.set_node_name(node);
    req.set_reason(reason);
    v1::UncordonNodeResponse resp;
    return cordon_.Call(&v1::CordonService::Stub::UncordonNode, req, &resp);
  }
  absl::Status Drain(const std::string& node, const std::string& reason) override {
    v1::DrainNodeRequest req;
    req.set_node_name(node);
    req.set_reason(reason);
    v1::DrainNodeResponse resp;
    return cordon_.Call(&v1::CordonService::Stub::DrainNode, req, &resp);
  }

 private:
  SystemClient<v1::CordonService> cordon_;
};

class GrpcRunsApi final : public RunsApi {
 public:
  GrpcRunsApi(std::shared_ptr<ChannelRef> c, SystemCredential key, ServiceClientOptions options)
      : runs_(std::move(c), std::move(key), "the run manager", options) {}
  absl::StatusOr<std::vector<v1::Run>> ListRunning() override {
    v1::ListRunsRequest req;
    req.mutable_filter()->add_statuses(v1::RUN_STATUS_RUNNING);
    v1::ListRunsResponse resp;
    auto st = runs_.Call(&v1::RunService::Stub::ListRuns, req, &resp);
    if (!st.ok()) return st;
    return std::vector<v1::Run>(resp.runs().begin(), resp.runs().end());
  }
  absl::StatusOr<std::vector<std::string>> ClearNodeAvoidance(const std::vector<std::string>& nodes,
                                                              const std::string& sweep_id,
                                                              absl::Time passed_at) override {
    v1::ClearNodeAvoidanceRequest req;
    for (const auto& n : nodes) req.add_node_names(n);
    req.set_sweep_id(sweep_id);
    *req.mutable_passed_at() = ToProtoTime(passed_at);
    v1::ClearNodeAvoidanceResponse resp;
    auto st = runs_.Call(&v1::RunService::Stub::ClearNodeAvoidance, req, &resp);
    if (!st.ok()) return st;
    return std::vector<std::string>(resp.run_names().begin(), resp.run_names().end());
  }

 private:
  SystemClient<v1::RunService> runs_;
};

}  // namespace

std::shared_ptr<SchedulerApi> MakeGrpcSchedulerApi(std::shared_ptr<ChannelRef> channel,
                                                   SystemCredential system_key,
                                                   ServiceClientOptions options) {
  return std::make_shared<GrpcSchedulerApi>(std::move(channel), std::move(system_key), options);
}
std::shared_ptr<CordonApi> MakeGrpcCordonApi(std::shared_ptr<ChannelRef> channel,
                                             SystemCredential system_key,
                                             ServiceClientOptions options) {
  return std::make_shared<GrpcCordonApi>(std::move(channel), std::move(system_key), options);
}
std::shared_ptr<RunsApi> MakeGrpcRunsApi(std::shared_ptr<ChannelRef> channel,
                                         SystemCredential system_key,
                                         ServiceClientOptions options) {
  return std::make_shared<GrpcRunsApi>(std::move(channel), std::move(system_key), options);
}

}  // namespace tessera::health
