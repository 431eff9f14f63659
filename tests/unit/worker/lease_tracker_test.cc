#include "worker/daemon/lease_tracker.h"

#include <catch2/catch.hpp>

namespace tessera::worker {
namespace lease_tracker_test {

const absl::Time t0 = absl::FromUnixSeconds(1000);

TEST_CASE("the lease runs from the send time of the newest acknowledged heartbeat") {
  LeaseTracker lease;
  CHECK_FALSE(lease.valid_until().has_value());
  CHECK_FALSE(lease.MustFence(t0 + absl::Hours(1), absl::ZeroDuration()));
  lease.Registered(t0, absl::Seconds(3));
  CHECK(*lease.valid_until() == t0 + absl::Seconds(3));

  lease.HeartbeatSent(1, t0 + absl::Milliseconds(500));
  lease.HeartbeatSent(2, t0 + absl::Milliseconds(1000));
  // The renewal of 2 arrives first (1's was lost): 1's late renewal must not shorten the lease.
  lease.Renewed(2);
  CHECK(*lease.valid_until() == t0 + absl::Milliseconds(4000));
  lease.Renewed(1);
  CHECK(*lease.valid_until() == t0 + absl::Milliseconds(4000));
  // Unknown sequences (from before a reconnect) change nothing.
  lease.Renewed(77);
  CHECK(*lease.valid_until() == t0 + absl::Milliseconds(4000));
}

TEST_CASE("fencing starts exactly the margin before the lease ends") {
  LeaseTracker lease;
  lease.Registered(t0, absl::Seconds(3));
  const absl::Duration margin = absl::Milliseconds(500);
  CHECK_FALSE(lease.MustFence(t0 + absl::Milliseconds(2499), margin));
  CHECK(lease.MustFence(t0 + absl::Milliseconds(2500), margin));
  CHECK(lease.MustFence(t0 + absl::Seconds(10), margin));
  // A renewal lifts it.
  lease.HeartbeatSent(1, t0 + absl::Milliseconds(2400));
  lease.Renewed(1);
  CHECK_FALSE(lease.MustFence(t0 + absl::Milliseconds(2600), margin));
  CHECK(lease.MustFence(t0 + absl::Milliseconds(4900), margin));
}

}  // namespace lease_tracker_test
}  // namespace tessera::worker
