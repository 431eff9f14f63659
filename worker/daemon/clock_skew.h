#pragma once
// How far this node's wall clock is from the control plane's, measured on every heartbeat: the
// control plane renews the lease until (its time when it answered + the lease), so its time then
// is the renewal's expiry minus the lease, and that moment lies between the heartbeat's sending
// and the answer's arrival on this node. The offset is taken against the midpoint, to within half
// the round trip. The pre-flight checks compare it with the cluster's bound.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera::worker {

class ClockSkew {
 public:
  // `wall` is this node's wall clock (the one ranks and logs see), not a monotonic one.
  explicit ClockSkew(std::shared_ptr<Clock> wall) : wall_(std::move(wall)) {}

  struct Estimate {
    // The control plane's time minus this node's: positive when this node is behind.
    absl::Duration offset;
    // Half the round trip: the true offset is within offset +- uncertainty.
    absl::Duration uncertainty;
    absl::Time measured_at;  // this node's wall time
  };

  void HeartbeatSent(int64_t sequence) {
    absl::MutexLock lock(&mu_);
    const absl::Time now = wall_->Now();
    sent_[sequence] = now;
    while (sent_.size() > 64) sent_.erase(sent_.begin());
  }
  // The answer to heartbeat `sequence`, with the control plane's time when it answered.
  void Answered(int64_t sequence, absl::Time control_plane_time) {
    absl::MutexLock lock(&mu_);
    auto it = sent_.find(sequence);
    if (it == sent_.end()) return;
    const absl::Time now = wall_->Now();
    const absl::Duration round_trip = now - it->second;
    sent_.erase(sent_.begin(), std::next(it));
    if (round_trip < absl::ZeroDuration()) return;  // the wall clock stepped back meanwhile
    latest_ = Estimate{control_plane_time - (it->second + round_trip / 2), round_trip / 2, now};
  }
  std::optional<Estimate> Latest() const {
    absl::MutexLock lock(&mu_);
    return latest_;
  }

 private:
  const std::shared_ptr<Clock> wall_;
  mutable absl::Mutex mu_;
  std::map<int64_t, absl::Time> sent_ ABSL_GUARDED_BY(mu_);
  std::optional<Estimate> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::worker
