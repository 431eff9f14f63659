// The worker's view of its lease, for fencing. The control plane extends the lease to
// (its receipt time + lease duration) for each heartbeat; the worker cannot know the receipt
// time, but it knows when it sent the heartbeat, which is earlier. So
//   valid_until = send time of the newest acknowledged heartbeat + lease duration
// is never later than the control plane's expiry, whatever the network delay, and ranks killed
// `margin` before it are dead before the control plane can declare the node lost and start a
// replacement attempt elsewhere. Only durations are compared, never the two machines' clocks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "absl/time/time.h"

namespace tessera::worker {

class LeaseTracker {
 public:
  // A registration sent at `sent` and accepted with `lease`.
  void Registered(absl::Time sent, absl::Duration lease) {
    lease_ = lease;
    Extend(sent);
    sent_.clear();
  }
  void HeartbeatSent(int64_t sequence, absl::Time sent) {
    sent_[sequence] = sent;
    // Unanswered heartbeats are kept for one lease at most.
    while (!sent_.empty() && sent - sent_.begin()->second > lease_) sent_.erase(sent_.begin());
  }
  void Renewed(int64_t sequence) {
    auto it = sent_.find(sequence);
    if (it == sent_.end()) return;
    Extend(it->second);
    sent_.erase(sent_.begin(), std::next(it));
  }
  // Nullopt before the first registration.
  std::optional<absl::Time> valid_until() const { return valid_until_; }
  // True once `now` is within `margin` of the end (or past it): time to kill the ranks.
  bool MustFence(absl::Time now, absl::Duration margin) const {
    return valid_until_ && now >= *valid_until_ - margin;
  }

 private:
  void Extend(absl::Time sent) {
    const absl::Time until = sent + lease_;
    if (!valid_until_ || until > *valid_until_) valid_until_ = until;
  }
  absl::Duration lease_ = absl::ZeroDuration();
  std::optional<absl::Time> valid_until_;
  std::map<int64_t, absl::Time> sent_;
};

}  // namespace tessera::worker
