#include "services/common/db_metrics.h"

#include "transport/metrics/must_register.h"

namespace tessera::metrics {
namespace {

class DbMetrics final : public store::TransactionObserver {
 public:
  explicit DbMetrics(Registry& registry)
      : seconds_(MustRegister(registry.AddHistogram(
            "tessera_db_transaction_seconds",
            "Database transactions by operation: from taking a pooled connection to the commit",
            {"operation"},
            {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}))),
        errors_(MustRegister(registry.AddCounter(
            "tessera_db_errors_total",
            "Database failures by operation and kind: unavailable (no server or a lost "
            "connection), in_doubt (lost while committing), unique_violation, internal",
            {"operation", "kind"}))) {}

  void TransactionEnded(std::string_view operation, double seconds,
                        std::string_view error_kind) override {
    seconds_->WithLabels({operation}).Observe(seconds);
    if (!error_kind.empty()) errors_->WithLabels({operation, error_kind}).Increment();
  }

 private:
  Family<Histogram>* seconds_;
  Family<Counter>* errors_;
};

}  // namespace

std::shared_ptr<store::TransactionObserver> MakeDbMetrics(Registry& registry) {
  return std::make_shared<DbMetrics>(registry);
}

}  // namespace tessera::metrics
