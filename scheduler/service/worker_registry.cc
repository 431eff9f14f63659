#include "scheduler/service/worker_registry.h"

#include "absl/strings/str_cat.h"

namespace tessera::scheduler {

uint64_t WorkerRegistry::Attach(const std::string& node, Sender sender) {
  absl::MutexLock lock(&mu_);
  const uint64_t token = next_token_++;
  workers_[node] = Entry{token, std::move(sender)};
  return token;
}

void WorkerRegistry::Detach(const std::string& node, uint64_t token) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(node);
  if (it != workers_.end() && it->second.token == token) workers_.erase(it);
}

bool WorkerRegistry::Send(const std::string& node, const v1::ControlMessage& message) {
  Sender sender;
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(node);
    if (it == workers_.end()) return false;
    sender = it->second.sender;
  }
  // Outside the lock: a slow stream must not block messages to other workers. The sender
  // serializes writes to its own stream.
  return sender(message);
}

absl::Status WorkerRegistry::SendAndWait(const std::string& node, const v1::ControlMessage& message,
                                         absl::Duration timeout) {
  const std::string id = message.command_id();
  {
    absl::MutexLock lock(&acks_mu_);
    acks_[id] = std::nullopt;
  }
  auto forget = [&] {
    absl::MutexLock lock(&acks_mu_);
    acks_.erase(id);
  };
  if (!Send(node, message)) {
    forget();
    return absl::UnavailableError(
        absl::StrCat("the worker of node ", node, " is not connected to this scheduler"));
  }
  absl::MutexLock lock(&acks_mu_);
  auto answered = [&] { return acks_[id].has_value(); };
  if (!acks_mu_.AwaitWithTimeout(absl::Condition(&answered), timeout)) {
    acks_.erase(id);
    return absl::DeadlineExceededError(
        absl::StrCat("node ", node, " did not acknowledge within ", absl::FormatDuration(timeout)));
  }
  const v1::CommandAck ack = *acks_[id];
  acks_.erase(id);
  if (!ack.ok()) return absl::FailedPreconditionError(ack.error());
  return absl::OkStatus();
}

void WorkerRegistry::OnAck(const v1::CommandAck& ack) {
  absl::MutexLock lock(&acks_mu_);
  auto it = acks_.find(ack.command_id());
  if (it != acks_.end()) it->second = ack;
  if (ack_listener_) ack_listener_(ack);
}

void WorkerRegistry::SetAckListener(std::function<void(const v1::CommandAck&)> listener) {
  absl::MutexLock lock(&acks_mu_);
  ack_listener_ = std::move(listener);
}

}  // namespace tessera::scheduler
