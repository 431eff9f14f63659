#pragma once
// The retention of a history that grows with time whatever runs do (node events, health
// sweeps): each pass deletes what is older than the period, in bounded batches so that no
// transaction holds many rows, until less than a batch is left or the pass's budget of batches
// is spent (the next pass goes on).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera {

class HistoryRetention {
 public:
  // Deletes at most `limit` of the oldest items from before `before`; how many it deleted.
  using DeleteBefore = std::function<absl::StatusOr<int64_t>(absl::Time before, int limit)>;

  // `what` names the history in logs ("node events"). A period of zero keeps everything.
  HistoryRetention(std::string what, absl::Duration period, std::shared_ptr<Clock> clock,
                   DeleteBefore delete_before, int batch = 1000, int max_batches = 100);

  // One pass; how many items it deleted.
  absl::StatusOr<int64_t> Apply();

 private:
  const std::string what_;
  const absl::Duration period_;
  const std::shared_ptr<Clock> clock_;
  const DeleteBefore delete_before_;
  const int batch_;
  const int max_batches_;
};

}  // namespace tessera
