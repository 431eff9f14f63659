#pragma once
// A channel that can be filled in after its users are built: in the all-in-one server the
// services call each other through the server's own in-process channel, which exists only once
// the server (with those services registered) has started.

#include <grpcpp/channel.h>

#include <memory>

#include "absl/synchronization/mutex.h"

namespace tessera {

class ChannelRef {
 public:
  ChannelRef() = default;
  explicit ChannelRef(std::shared_ptr<grpc::Channel> channel) : channel_(std::move(channel)) {}

  void Set(std::shared_ptr<grpc::Channel> channel) {
    absl::MutexLock lock(&mu_);
    channel_ = std::move(channel);
  }
  // Null until Set.
  std::shared_ptr<grpc::Channel> Get() const {
    absl::MutexLock lock(&mu_);
    return channel_;
  }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace tessera
