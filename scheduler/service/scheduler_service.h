#pragma once
// The gRPC adapters of the scheduler: the SchedulerService API and the workers' control stream.

#include <functional>

#include "scheduler/service/scheduler_core.h"
#include "services/common/rpc.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::scheduler {

class SchedulerService final : public v1::SchedulerService::Service {
 public:
  SchedulerService(std::shared_ptr<SchedulerCore> core, std::shared_ptr<auth::Authenticator> auth,
                   std::function<bool()> is_leader, std::string instance_id)
      : core_(std::move(core)),
        auth_(std::move(auth)),
        is_leader_(std::move(is_leader)),
        instance_id_(std::move(instance_id)) {}

#define TESSERA_SCHED_RPC(Method, Req, Resp)                                                   \
  grpc::Status Method(grpc::ServerContext* ctx, const v1::Req* req, v1::Resp* resp) override { \
    return Serve(*auth_, ctx,                                                                  \
                 [&](const auth::Principal& who) { return core_->Method(who, *req, resp); });  \
  }
  TESSERA_SCHED_RPC(ListNodes, ListNodesRequest, ListNodesResponse)
  TESSERA_SCHED_RPC(GetNode, GetNodeRequest, GetNodeResponse)
  TESSERA_SCHED_RPC(SetNodeLabels, SetNodeLabelsRequest, SetNodeLabelsResponse)
  TESSERA_SCHED_RPC(RemoveNode, RemoveNodeRequest, RemoveNodeResponse)
  TESSERA_SCHED_RPC(GetQueue, GetQueueRequest, GetQueueResponse)
  TESSERA_SCHED_RPC(CheckFit, CheckFitRequest, CheckFitResponse)
  TESSERA_SCHED_RPC(DispatchToWorker, DispatchToWorkerRequest, DispatchToWorkerResponse)
  TESSERA_SCHED_RPC(EvictNode, EvictNodeRequest, EvictNodeResponse)
#undef TESSERA_SCHED_RPC

  grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::SchedulerStatusRequest*,
                         v1::SchedulerStatusResponse* resp) override {
    return Serve(*auth_, ctx, [&](const auth::Principal&) {
      resp->set_leader(is_leader_());
      resp->set_instance_id(instance_id_);
      resp->set_placements_total(core_->placements_total());
      return absl::OkStatus();
    });
  }

 private:
  std::shared_ptr<SchedulerCore> core_;
  std::shared_ptr<auth::Authenticator> auth_;
  std::function<bool()> is_leader_;
  std::string instance_id_;
};

class WorkerControlService final : public v1::WorkerControl::Service {
 public:
  WorkerControlService(std::shared_ptr<SchedulerCore> core, std::shared_ptr<WorkerRegistry> workers,
                       std::shared_ptr<auth::Authenticator> auth, std::function<bool()> is_leader)
      : core_(std::move(core)),
        workers_(std::move(workers)),
        auth_(std::move(auth)),
        is_leader_(std::move(is_leader)) {}

  grpc::Status Connect(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::ControlMessage, v1::WorkerMessage>* stream) override;

 private:
  std::shared_ptr<SchedulerCore> core_;
  std::shared_ptr<WorkerRegistry> workers_;
  std::shared_ptr<auth::Authenticator> auth_;
  std::function<bool()> is_leader_;
};

}  // namespace tessera::scheduler
