#pragma once
// Waits in real time for something another thread makes true: a test's one wait loop.

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tessera::testing {

// Whether `holds()` became true within `patience` (checked every `every`).
inline bool PollUntil(const std::function<bool()>& holds, absl::Duration patience,
                      absl::Duration every = absl::Milliseconds(5)) {
  const absl::Time deadline = absl::Now() + patience;
  while (!holds()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(every);
  }
  return true;
}

}  // namespace tessera::testing
