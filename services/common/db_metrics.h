#pragma once
// The database's part in the binaries' metrics: every transaction timed and every failure of
// the database counted, by operation (the store's fixed name for each call site, so the label
// set is bounded):
//
//   tessera_db_transaction_seconds{operation}   histogram, from taking a pooled connection to
//                                               the commit
//   tessera_db_errors_total{operation,kind}     unavailable, in_doubt, unique_violation, internal
//
//   store::PostgresOptions db{...};
//   db.observer = metrics::MakeDbMetrics(metrics::Registry::Default());

#include <memory>

#include "services/store/transaction_observer.h"
#include "transport/metrics/registry.h"

namespace tessera::metrics {

// Registers the families in `registry` (once per registry: a second call shares them).
std::shared_ptr<store::TransactionObserver> MakeDbMetrics(Registry& registry);

}  // namespace tessera::metrics
