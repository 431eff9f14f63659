#include <spdlog/spdlog.h>

#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "scheduler/service/scheduler_service.h"
#include "services/common/auth/stream_guard.h"
#include "services/common/standby.h"
#include "transport/grpc_status.h"

namespace tessera::scheduler {
namespace {

void LogHealthRelay(const std::string& node, const char* what, const absl::Status& st) {
  if (!st.ok()) spdlog::warn("{} from node {}: {}", what, node, st.ToString());
}

}  // namespace

// One worker's control stream. Reads one message at a time: a heartbeat is answered at once,
// anything else is handled on the service's pool and the next read starts after it.
//
// Writes come from the scheduler's threads too (WorkerRegistry's sender) and gRPC allows one at
// a time, so they queue in an outbox; until the registration reply is written, the others'
// messages are held back, then sent after it in order (the worker takes any first message other
// than `registered` as a failed registration). The outbox outlives the stream: a sender called
// after the stream ended finds it closed.
class ControlStream final : public AsyncBidiReactor<v1::WorkerMessage, v1::ControlMessage> {
 public:
  using Api = v1::WorkerControl;

  ControlStream(WorkerControlService* service, grpc::ServerContext* ctx)
      : service_(service), ctx_(ctx), outbox_(std::make_shared<Outbox>()) {}

  void OnStart() override {
    outbox_->stream = this;
    auto who = service_->auth_->Authenticate(*ctx_);
    absl::Status refused = who.status();
    if (who.ok()) refused = auth::CheckRpcRole(TESSERA_RPC_NAME(Connect), *who);
    if (!refused.ok()) {
      Finish(ToGrpcStatus(refused));
      return;
    }
    who_node_ = who->node;
    who_terms_ = who->node_terms;
    auto guard = auth::StreamGuard::Open(*service_->auth_, *ctx_, *who,
                                         auth::StreamGuard::Lifetime::kUnbounded);
    if (!guard.ok()) {
      Finish(ToGrpcStatus(guard.status()));
      return;
    }
    key_.emplace(*std::move(guard));
    if (!service_->is_leader_()) {
      Finish(ToGrpcStatus(StandbyError("scheduler", "connect to the leader")));
      return;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the worker went, or the call was cancelled
      End(grpc::Status::OK);
      return;
    }
    // `in_` stays as it is until the handling of it starts the next read: no copy.
    if (node_.empty()) {
      service_->handlers_->Submit([this] { Register(in_); });
      return;
    }
    // An instance that learned that another one leads closes its streams at the next message,
    // a heartbeat at most, so that its workers find the new leader instead of heartbeating
    // into an instance that no longer decides anything. One that only cannot confirm its term
    // (the database is away) keeps them and answers heartbeats from memory: an outage must not
    // fence a node; it writes and commands nothing meanwhile (its fence refuses).
    // A key revoked or expired while the stream is open ends it (never waiting for the store).
    if (auto still = key_->CheckKey(); !still.ok()) {
      End(ToGrpcStatus(still));
      return;
    }
    if (!service_->keeps_streams_()) {
      End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       "this scheduler instance is no longer the leader; connect to the leader"));
      return;
    }
    if (in_.has_heartbeat()) {
      Handle(in_);  // leases are in memory: no wait
    } else {
      service_->handlers_->Submit([this] { Handle(in_); });
    }
  }

  void OnWriteDone(bool ok) override {
    std::optional<grpc::Status> finish;
    bool next = false;
    {
      absl::MutexLock lock(&outbox_->mu);
      outbox_->writing = false;
      if (!ok) outbox_->queue.clear();  // the stream is broken: its read ends it
      if (outbox_->finishing) {
        finish = TakeFinishLocked();
      } else {
        next = NextWriteLocked();
      }
    }
    if (next) StartWrite(&outbox_->current);
    if (finish) Finish(*finish);
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&outbox_->mu);
      outbox_->stream = nullptr;
    }
    delete this;
  }

 private:
  struct Outbox {
    absl::Mutex mu;
    ControlStream* stream = nullptr;  // null once the stream is done
    bool open = false;                // the registration reply is queued first
    bool writing = false;
    bool finishing = false;
    bool finished = false;
    grpc::Status status;
    std::deque<v1::ControlMessage> queue;
    v1::ControlMessage current;  // being written
  };

  // Queues a message; false once the stream is ending.
  static bool Write(const std::shared_ptr<Outbox>& box, const v1::ControlMessage& m,
                    bool registration = false) {
    ControlStream* stream = nullptr;
    {
      absl::MutexLock lock(&box->mu);
      if (box->stream == nullptr || box->finishing) return false;
      if (registration) {
        box->open = true;
        box->queue.push_front(m);
      } else {
        box->queue.push_back(m);
      }
      if (box->stream->NextWriteLocked()) stream = box->stream;
    }
    // Outside the lock: gRPC may run a reaction before StartWrite returns.
    if (stream != nullptr) stream->StartWrite(&box->current);
    return true;
  }

  // Takes the next message to write when none is being written (true: start it).
  bool NextWriteLocked() {
    if (outbox_->writing || !outbox_->open || outbox_->queue.empty()) return false;
    outbox_->current = std::move(outbox_->queue.front());
    outbox_->queue.pop_front();
    outbox_->writing = true;
    return true;
  }

  std::optional<grpc::Status> TakeFinishLocked() {
    if (outbox_->writing || outbox_->finished) return std::nullopt;
    outbox_->finished = true;
    return outbox_->status;
  }

  // Ends the stream with `status` once the write in progress (if any) is done.
  void End(grpc::Status status) {
    if (!node_.empty()) service_->workers_->Detach(node_, token_);
    if (!status.ok() && !node_.empty()) {
      // The worker reconnects and registers again: say why, or a node that keeps doing so is a
      // mystery to its operator.
      spdlog::warn("control stream of node {} ended: {}", node_, status.error_message());
    }
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&outbox_->mu);
      if (outbox_->finishing) return;
      outbox_->finishing = true;
      outbox_->status = std::move(status);
      outbox_->queue.clear();
      finish = TakeFinishLocked();
    }
    if (finish) Finish(*finish);
  }

  // The first message: registration (on the pool: it writes the node to the store).
  void Register(const v1::WorkerMessage& first) {
    if (!first.has_register_()) {
      End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       "the first message on the control stream must be register"));
      return;
    }
    const std::string node = first.register_().node().name();
    // A node key acts only as its own node: registering as another would replace that node's
    // stream and receive its runs' commands.
    if (node != who_node_) {
      End(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                       absl::StrCat("this key belongs to node \"", who_node_,
                                    "\" and cannot register as \"", node, "\"")));
      return;
    }
    // Attach before registering so that orphan stops decided during registration reach it; what
    // others send before the reply waits for it (once, a start resent at every registration
    // kept a node registering again and again, lost every few seconds).
    std::shared_ptr<Outbox> box = outbox_;
    write_ = [box](const v1::ControlMessage& m) { return Write(box, m); };
    node_ = node;
    token_ = service_->workers_->Attach(node, write_);
    auto registered = service_->sessions_->RegisterWorker(first.register_(), who_terms_);
    if (!registered.ok()) {
      End(ToGrpcStatus(registered.status()));
      return;
    }
    v1::ControlMessage reply;
    *reply.mutable_registered() = *registered;
    Write(box, reply, /*registration=*/true);
    StartRead(&in_);
  }

  void Handle(const v1::WorkerMessage& msg) {
    const absl::Status st = service_->Dispatch(node_, msg, write_);
    if (absl::IsFailedPrecondition(st) || absl::IsInvalidArgument(st)) {
      End(ToGrpcStatus(st));  // the worker must start over (register again)
      return;
    }
    if (!st.ok()) spdlog::warn("control stream of node {}: {}", node_, st.ToString());
    StartRead(&in_);
  }

  WorkerControlService* const service_;
  grpc::ServerContext* const ctx_;
  const std::shared_ptr<Outbox> outbox_;
  std::string who_node_;
  // What the node key says the node is (HoldToTerms holds its registration to them).
  v1::NodeTerms who_terms_;
  // The node's key, checked again at each message (set once authenticated).
  std::optional<auth::StreamGuard> key_;
  // Set once registered (before the stream's next read).
  std::string node_;
  uint64_t token_ = 0;
  std::function<bool(const v1::ControlMessage&)> write_;
  v1::WorkerMessage in_;
};

WorkerControlService::WorkerControlService(const Scheduler& scheduler,
                                           std::shared_ptr<WorkerRegistry> workers,
                                           std::shared_ptr<auth::Authenticator> auth,
                                           std::function<bool()> is_leader,
                                           std::function<bool()> keeps_streams, int handler_threads,
                                           int stream_queues)
    : sessions_(scheduler.sessions),
      health_relay_(scheduler.health_relay),
      progress_(scheduler.progress),
      workers_(std::move(workers)),
      auth_(std::move(auth)),
      is_leader_(std::move(is_leader)),
      keeps_streams_(std::move(keeps_streams)),
      handlers_(std::make_unique<ThreadPool>(handler_threads)),
      streams_(std::make_unique<AsyncBidiServer<v1::WorkerMessage, v1::ControlMessage>>(
          [this](grpc::ServerContext* ctx,
                 grpc::ServerAsyncReaderWriter<v1::ControlMessage, v1::WorkerMessage>* stream,
                 grpc::ServerCompletionQueue* cq,
                 void* tag) { RequestConnect(ctx, stream, cq, cq, tag); },
          [this](grpc::ServerContext* ctx)
              -> AsyncBidiReactor<v1::WorkerMessage, v1::ControlMessage>* {
            return new ControlStream(this, ctx);
          },
          stream_queues)) {}

WorkerControlService::~WorkerControlService() = default;

absl::Status WorkerControlService::Dispatch(
    const std::string& node, const v1::WorkerMessage& msg,
    const std::function<bool(const v1::ControlMessage&)>& write) {
  switch (msg.body_case()) {
    case v1::WorkerMessage::kHeartbeat: {
      auto renewed = sessions_->Heartbeat(node, msg.heartbeat());
      if (!renewed.ok()) return renewed.status();
      v1::ControlMessage m;
      *m.mutable_lease_renewed() = *renewed;
      write(m);
      // Reports kept while the run manager was away go again, off this stream's turn.
      if (progress_->pending() > 0) handlers_->Submit([p = progress_] { p->RetryDue(); });
      return absl::OkStatus();
    }
    case v1::WorkerMessage::kAttemptUpdate:
      return sessions_->OnAttemptUpdate(node, msg.attempt_update());
    case v1::WorkerMessage::kProgress:
      return progress_->Relay(node, msg.progress());
    // The health API's answers are its own business: a refusal there is logged, and never ends
    // the worker's stream.
    case v1::WorkerMessage::kHealthResult:
      LogHealthRelay(node, "canary result",
                     health_relay_->OnHealthResult(node, msg.health_result()));
      return absl::OkStatus();
    case v1::WorkerMessage::kGpuFault:
      LogHealthRelay(node, "GPU fault", health_relay_->OnGpuFault(node, msg.gpu_fault()));
      return absl::OkStatus();
    case v1::WorkerMessage::kRankHang:
      LogHealthRelay(node, "rank hang", health_relay_->OnRankHang(node, msg.rank_hang()));
      return absl::OkStatus();
    case v1::WorkerMessage::kAck:
      workers_->OnAck(msg.ack());
      if (!msg.ack().ok()) {
        spdlog::warn("node {} could not carry out {}: {}", node, msg.ack().command_id(),
                     msg.ack().error());
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError("unexpected message on the control stream");
  }
}

}  // namespace tessera::scheduler
