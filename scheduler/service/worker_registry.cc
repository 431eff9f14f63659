#include "scheduler/service/worker_registry.h"

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

bool WorkerRegistry::Connected(const std::string& node) {
  absl::MutexLock lock(&mu_);
  return workers_.count(node) > 0;
}

}  // namespace tessera::scheduler
