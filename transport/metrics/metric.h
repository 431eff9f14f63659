#pragma once
// The three metric kinds and the plain snapshots the exposition is rendered from.
//
// Every mutation is a lock-free atomic operation, so a Counter&, Gauge& or Histogram& obtained
// once from a Family may be used from any thread on a hot path.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge" or "histogram", as written on a `# TYPE` line.
const char* MetricTypeName(MetricType type);

// One labelled child of a family, copied out for rendering.
struct MetricSnapshot {
  std::vector<std::string> label_values;
  // Counter and gauge.
  double value = 0;
  // Histogram: cumulative counts, one per finite upper bound and a last one for +Inf.
  std::vector<std::uint64_t> cumulative_counts;
  double sum = 0;
  std::uint64_t count = 0;
};

// A family and its children, copied out for rendering.
struct FamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::kCounter;
  std::vector<std::string> label_names;
  std::vector<double> bucket_bounds;  // histogram only; finite, strictly increasing
  std::vector<MetricSnapshot> metrics;
};

// A monotonically increasing value.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds `v`. A negative or NaN `v` is a caller bug: it is ignored (a counter never goes down).
  void Increment(double v = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Increment(double v = 1.0);
  void Decrement(double v = 1.0) { Increment(-v); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted into buckets with fixed upper bounds (inclusive, as Prometheus's `le`).
class Histogram {
 public:
  // `bounds` must be finite and strictly increasing (Registry validates them); +Inf is implicit.
  explicit Histogram(std::shared_ptr<const std::vector<double>> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double v);

  const std::vector<double>& bounds() const { return *bounds_; }
  // Fills cumulative_counts, sum and count. The count is the +Inf bucket, so the two always agree.
  void SnapshotInto(MetricSnapshot& out) const;

 private:
  std::shared_ptr<const std::vector<double>> bounds_;
  // Non-cumulative: counts_[i] for bounds_[i], the last one for +Inf.
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
  std::atomic<double> sum_{0.0};
};

}  // namespace tessera::metrics
