#pragma once
// The gRPC adapters of the scheduler: the SchedulerService API and the workers' control stream.

#include <functional>
#include <memory>
#include <string>

#include "base/thread_pool.h"
#include "scheduler/service/scheduler.h"
#include "services/common/rpc.h"
#include "services/common/standby.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tessera/v1/worker.grpc.pb.h"
#include "transport/async_bidi.h"

namespace tessera::scheduler {

class SchedulerService final : public v1::SchedulerService::Service {
 public:
  using Api = v1::SchedulerService;

  SchedulerService(const Scheduler& scheduler, std::shared_ptr<auth::Authenticator> auth,
                   std::function<bool()> is_leader, std::string instance_id)
      : node_api_(scheduler.node_api),
        health_relay_(scheduler.health_relay),
        attempts_(scheduler.attempts),
        auth_(std::move(auth)),
        is_leader_(std::move(is_leader)),
        instance_id_(std::move(instance_id)) {}

  TESSERA_UNARY_RPC(node_api_, ListNodes)
  TESSERA_UNARY_RPC(node_api_, GetNode)
  TESSERA_UNARY_RPC(node_api_, SetNodeLabels)
  TESSERA_UNARY_RPC(node_api_, RemoveNode)
  TESSERA_UNARY_RPC(node_api_, GetQueue)
  TESSERA_UNARY_RPC(node_api_, CheckFit)
  TESSERA_UNARY_RPC(node_api_, GetUtilization)

  // Only the leader holds the workers' streams and the attempts: a standby refuses, and the
  // caller tries another instance.
  grpc::Status DispatchToWorker(grpc::ServerContext* ctx, const v1::DispatchToWorkerRequest* req,
                                v1::DispatchToWorkerResponse* resp) override {
    return Serve(*auth_, ctx, TESSERA_RPC_NAME(DispatchToWorker), [&](const auth::Principal& who) {
      if (!is_leader_()) return StandbyError("scheduler", "send commands to the leader");
      return health_relay_->DispatchToWorker(who, *req, resp);
    });
  }
  grpc::Status EvictNode(grpc::ServerContext* ctx, const v1::EvictNodeRequest* req,
                         v1::EvictNodeResponse* resp) override {
    return Serve(*auth_, ctx, TESSERA_RPC_NAME(EvictNode), [&](const auth::Principal& who) {
      if (!is_leader_()) return StandbyError("scheduler", "evictions go to the leader");
      return health_relay_->EvictNode(who, *req, resp);
    });
  }

  grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::SchedulerStatusRequest*,
                         v1::SchedulerStatusResponse* resp) override {
    return Serve(*auth_, ctx, TESSERA_RPC_NAME(GetStatus), [&](const auth::Principal&) {
      resp->set_leader(is_leader_());
      resp->set_instance_id(instance_id_);
      resp->set_placements_total(attempts_->placements_total());
      return absl::OkStatus();
    });
  }

 private:
  std::shared_ptr<NodeApi> node_api_;
  std::shared_ptr<HealthRelay> health_relay_;
  std::shared_ptr<AttemptTracker> attempts_;
  std::shared_ptr<auth::Authenticator> auth_;
  std::function<bool()> is_leader_;
  std::string instance_id_;
};

class ControlStream;

// The workers' control streams, on gRPC's callback API: a stream is a reactor, not a thread, so
// 10,000 nodes heartbeating twice a second cost no thread each and no hand-off per message. A
// heartbeat is answered where it is read (leases are in memory); every other message, which may
// wait on the database or the run manager, runs on a small pool, and the stream reads its next
// message only once that is done, so a node's messages keep their order.
// Served on the async API, on `stream_queues` completion queues of its own (async_bidi.h: the
// callback API's one shared queue cost CPU with every connected node).
class WorkerControlService final : public v1::WorkerControl::AsyncService, public AsyncServing {
 public:
  using Api = v1::WorkerControl;

  // `is_leader`: whether this instance leads now (new streams are accepted only then).
  // `keeps_streams`: whether its open streams stay (LeaderElection::KeepsWorkers: while it leads,
  // and while it merely cannot confirm its term, e.g. the database is away); once another
  // instance is known to lead, each stream ends at its next message.
  WorkerControlService(const Scheduler& scheduler, std::shared_ptr<WorkerRegistry> workers,
                       std::shared_ptr<auth::Authenticator> auth, std::function<bool()> is_leader,
                       std::function<bool()> keeps_streams, int handler_threads = 4,
                       int stream_queues = 8);
  ~WorkerControlService() override;

  void AddCompletionQueues(grpc::ServerBuilder& builder) override {
    streams_->AddCompletionQueues(builder);
  }
  void Started() override { streams_->Start(); }
  void Stop() override { streams_->Stop(); }

 private:
  friend class ControlStream;
  // Hands one message of the stream to the role that handles it.
  absl::Status Dispatch(const std::string& node, const v1::WorkerMessage& msg,
                        const std::function<bool(const v1::ControlMessage&)>& write);

  std::shared_ptr<WorkerSessions> sessions_;
  std::shared_ptr<HealthRelay> health_relay_;
  std::shared_ptr<ProgressRelay> progress_;
  std::shared_ptr<WorkerRegistry> workers_;
  std::shared_ptr<auth::Authenticator> auth_;
  std::function<bool()> is_leader_;
  std::function<bool()> keeps_streams_;
  std::unique_ptr<ThreadPool> handlers_;
  // Destroyed first: it waits for the streams to end, some in handlers_.
  std::unique_ptr<AsyncBidiServer<v1::WorkerMessage, v1::ControlMessage>> streams_;
};

}  // namespace tessera::scheduler
