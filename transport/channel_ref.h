#pragma once
// A channel that can be filled in after its users are built: in the all-in-one server the
// services call each other through the server's own in-process channel, which exists only once
// the server (with those services registered) has started.
//
// It may also hold one channel per instance of a service of which only one instance (the
// leader) can answer some calls (the scheduler: commands to workers, evictions). Calls go to
// one instance; a caller that got UNAVAILABLE from it (a standby's refusal, or no answer) moves
// on to the next (SystemClient does).

#include <grpcpp/channel.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace tessera {

class ChannelRef {
 public:
  ChannelRef() = default;
  explicit ChannelRef(std::shared_ptr<grpc::Channel> channel) { channels_.push_back(channel); }
  // One channel per instance, tried in turn.
  explicit ChannelRef(std::vector<std::shared_ptr<grpc::Channel>> channels)
      : channels_(std::move(channels)) {}

  void Set(std::shared_ptr<grpc::Channel> channel) {
    absl::MutexLock lock(&mu_);
    channels_ = {std::move(channel)};
    current_ = 0;
  }
  // The channel calls go to now; null until Set.
  std::shared_ptr<grpc::Channel> Get() const { return Current().first; }
  // The same with its position, for MoveOn.
  std::pair<std::shared_ptr<grpc::Channel>, size_t> Current() const {
    absl::MutexLock lock(&mu_);
    if (channels_.empty()) return {nullptr, 0};
    return {channels_[current_], current_};
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return channels_.size();
  }
  // Calls go to the next instance from now on, unless another caller already moved on from
  // `from` (so that two callers that failed at once do not skip an instance).
  void MoveOn(size_t from) {
    absl::MutexLock lock(&mu_);
    if (current_ == from && !channels_.empty()) current_ = (current_ + 1) % channels_.size();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera
