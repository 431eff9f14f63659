#pragma once
// The health API's views of the other services, each only through its gRPC API: the scheduler
// (nodes, commands to workers, evicting a node's runs), the cordon service, the run manager.
// Interfaces, so the handler is tested with fakes; the gRPC implementations use a system key.

#include <google/protobuf/struct.pb.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/common/system_client.h"
#include "services/common/system_credential.h"
#include "tessera/v1/cordon.pb.h"
#include "tessera/v1/runs.pb.h"
#include "tessera/v1/scheduler.pb.h"
#include "transport/channel_ref.h"

namespace tessera::health {

class SchedulerApi {
 public:
  virtual ~SchedulerApi() = default;
  virtual absl::StatusOr<std::vector<v1::Node>> ListNodes() = 0;
  virtual absl::Status DispatchToWorker(const v1::DispatchToWorkerRequest& req) = 0;
  // Returns the names of the runs whose attempts ended.
  virtual absl::StatusOr<std::vector<std::string>> EvictNode(const v1::EvictNodeRequest& req) = 0;
};

class CordonApi {
 public:
  virtual ~CordonApi() = default;
  virtual absl::Status Cordon(const std::string& node, const std::string& reason,
                              const google::protobuf::Struct& evidence) = 0;
  virtual absl::Status Uncordon(const std::string& node, const std::string& reason) = 0;
  // Nothing new is placed on the node; its runs go on.
  virtual absl::Status Drain(const std::string& node, const std::string& reason) = 0;
};

class RunsApi {
 public:
  virtual ~RunsApi() = default;
  virtual absl::StatusOr<std::vector<v1::Run>> ListRunning() = 0;
  // Sweep `sweep_id`, finished at `passed_at`, passed `nodes`: runs that keep off one of them
  // may go there again (RunService.ClearNodeAvoidance). Returns those runs' names.
  virtual absl::StatusOr<std::vector<std::string>> ClearNodeAvoidance(
      const std::vector<std::string>& nodes, const std::string& sweep_id, absl::Time passed_at) = 0;
};

// The health API's calls wait 15 s, but an eviction at least 30 s (it ends every attempt on the
// node through the run manager) and a dispatch as long as the worker may take to answer (its
// timeout_seconds, 10 when unset) plus 5 s.
inline constexpr ServiceClientOptions kHealthClientOptions{.deadline = absl::Seconds(15)};

// Over gRPC with a system API key.
std::shared_ptr<SchedulerApi> MakeGrpcSchedulerApi(
    std::shared_ptr<ChannelRef> channel, SystemCredential system_key,
    ServiceClientOptions options = kHealthClientOptions);
std::shared_ptr<CordonApi> MakeGrpcCordonApi(std::shared_ptr<ChannelRef> channel,
                                             SystemCredential system_key,
                                             ServiceClientOptions options = kHealthClientOptions);
std::shared_ptr<RunsApi> MakeGrpcRunsApi(std::shared_ptr<ChannelRef> channel,
                                         SystemCredential system_key,
                                         ServiceClientOptions options = kHealthClientOptions);

}  // namespace tessera::health
