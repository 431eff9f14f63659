#pragma once
// Told of each database transaction as it ends, so that the binaries can time and count them
// (services/common/db_metrics.h) while the store itself knows nothing of metrics.

#include <string_view>

namespace tessera::store {

class TransactionObserver {
 public:
  virtual ~TransactionObserver() = default;
  // `operation`: the call site's fixed name ("creating a run"). `error_kind`: empty when the
  // database did its part (the transaction committed, or the caller's own code refused it);
  // otherwise "unavailable" (no server, a lost connection), "in_doubt" (lost while committing),
  // "unique_violation" or "internal". Called on the caller's thread; must be cheap.
  virtual void TransactionEnded(std::string_view operation, double seconds,
                                std::string_view error_kind) = 0;
};

}  // namespace tessera::store
