#pragma once
// Driving an AttemptManager in tests as the worker's loop does: Poll, then take its updates.

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "tests/support/poll_until.h"
#include "worker/daemon/attempt_manager.h"

namespace tessera::testing {

// Polls `manager` until an update with `phase` arrives (failing the test after `timeout`);
// returns every update seen.
inline std::vector<v1::AttemptUpdate> PollUntilPhase(worker::AttemptManager& manager,
                                                     v1::AttemptPhase phase,
                                                     absl::Duration timeout = absl::Seconds(10)) {
  std::vector<v1::AttemptUpdate> seen;
  const bool arrived = PollUntil(
      [&] {
        manager.Poll();
        for (auto& u : manager.TakeUpdates()) seen.push_back(u);
        for (const auto& u : seen) {
          if (u.phase() == phase) return true;
        }
        return false;
      },
      timeout, absl::Milliseconds(10));
  if (!arrived) FAIL("no update with phase " << v1::AttemptPhase_Name(phase));
  return seen;
}

}  // namespace tessera::testing
