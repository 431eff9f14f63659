#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <vector>

#include "scheduler/service/scheduler_service.h"
#include "services/common/standby.h"

namespace tessera::scheduler {
namespace {

void LogHealthRelay(const std::string& node, const char* what, const absl::Status& st) {
  if (!st.ok()) spdlog::warn("{} from node {}: {}", what, node, st.ToString());
}

// The writes of one worker's stream. gRPC allows one Write at a time on a stream and the
// scheduler's threads write to it too, so writes go through one mutex; until the registration
// reply is written, the others' messages are held back, then sent after it in order.
class RegisteredFirstWriter {
 public:
  explicit RegisteredFirstWriter(grpc::ServerReaderWriter<v1::ControlMessage, v1::WorkerMessage>* s)
      : stream_(s) {}

  bool Write(const v1::ControlMessage& m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) {
      held_.push_back(m);
      return true;
    }
    return stream_->Write(m);
  }

  // Writes the reply, then what was held back.
  bool Open(const v1::ControlMessage& registered) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    bool ok = stream_->Write(registered);
    for (const auto& m : held_) ok = ok && stream_->Write(m);
    held_.clear();
    return ok;
  }

 private:
  grpc::ServerReaderWriter<v1::ControlMessage, v1::WorkerMessage>* const stream_;
  std::mutex mu_;
  bool open_ = false;
  std::vector<v1::ControlMessage> held_;
};

}  // namespace

grpc::Status WorkerControlService::Connect(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::ControlMessage, v1::WorkerMessage>* stream) {
  auto who = auth_->Authenticate(*ctx);
  if (!who.ok()) return ToGrpcStatus(who.status());
  if (auto st = auth::CheckRpcRole(TESSERA_RPC_NAME(Connect), *who); !st.ok()) {
    return ToGrpcStatus(st);
  }
  const std::string key_hash = *auth_->KeyHash(*ctx);  // it authenticated
  if (!is_leader_()) {
    return ToGrpcStatus(StandbyError("scheduler", "connect to the leader"));
  }
  v1::WorkerMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (!first.has_register_()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message on the control stream must be register");
  }
  const std::string node = first.register_().node().name();
  // A node key acts only as its own node: registering as another would replace that node's
  // stream and receive its runs' commands.
  if (node != who->node) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("this key belongs to node \"", who->node,
                                     "\" and cannot register as \"", node, "\""));
  }
  // Attach before registering so that orphan stops decided during registration reach it. The
  // worker takes any first message other than `registered` as a failed registration, so what
  // others send before the reply waits for it (once, a start resent at every registration
  // kept a node registering again and again, lost every few seconds).
  auto writer = std::make_shared<RegisteredFirstWriter>(stream);
  auto write = [writer](const v1::ControlMessage& m) { return writer->Write(m); };
  const uint64_t token = workers_->Attach(node, write);
  auto registered = sessions_->RegisterWorker(first.register_());
  if (!registered.ok()) {
    workers_->Detach(node, token);
    return ToGrpcStatus(registered.status());
  }
  v1::ControlMessage reply;
  *reply.mutable_registered() = *registered;
  writer->Open(reply);

  grpc::Status result = grpc::Status::OK;
  v1::WorkerMessage msg;
  while (stream->Read(&msg)) {
    // An instance that learned that another one leads closes its streams at the next message,
    // a heartbeat at most, so that its workers find the new leader instead of heartbeating
    // into an instance that no longer decides anything. One that only cannot confirm its term
    // (the database is away) keeps them and answers heartbeats from memory: an outage must not
    // fence a node; it writes and commands nothing meanwhile (its fence refuses).
    // A key revoked or expired while the stream is open ends it (never waiting for the store).
    if (auto still = auth_->Revalidate(key_hash); !still.ok()) {
      result = ToGrpcStatus(still);
      break;
    }
    if (!keeps_streams_()) {
      result =
          grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       "this scheduler instance is no longer the leader; connect to the leader");
      break;
    }
    const absl::Status st = Dispatch(node, msg, write);
    if (absl::IsFailedPrecondition(st) || absl::IsInvalidArgument(st)) {
      result = ToGrpcStatus(st);  // the worker must start over (register again)
      break;
    }
    if (!st.ok()) spdlog::warn("control stream of node {}: {}", node, st.ToString());
  }
  workers_->Detach(node, token);
  return result;
}

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
      return absl::OkStatus();
    }
    case v1::WorkerMessage::kAttemptUpdate:
      return sessions_->OnAttemptUpdate(node, msg.attempt_update());
    case v1::WorkerMessage::kProgress:
      return sessions_->OnProgress(node, msg.progress());
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
