#include "transport/metrics/metric.h"

#include <algorithm>
#include <cmath>

namespace tessera::metrics {

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void Counter::Increment(double v) {
  if (!(v >= 0)) return;  // negative or NaN: ignored, never a crash
  value_.fetch_add(v, std::memory_order_relaxed);
}

void Gauge::Increment(double v) { value_.fetch_add(v, std::memory_order_relaxed); }

Histogram::Histogram(std::shared_ptr<const std::vector<double>> bounds)
    : bounds_(std::move(bounds)),
      counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_->size() + 1)) {}

void Histogram::Observe(double v) {
  // The first bucket whose upper bound is >= v; NaN and values above every bound land in +Inf.
  const auto& b = *bounds_;
  const std::size_t i =
      std::isnan(v) ? b.size()
                    : static_cast<std::size_t>(std::lower_bound(b.begin(), b.end(), v) - b.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

void Histogram::SnapshotInto(MetricSnapshot& out) const {
  const std::size_t n = bounds_->size() + 1;
  out.cumulative_counts.resize(n);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < n; ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    out.cumulative_counts[i] = running;
  }
  out.count = running;
  out.sum = sum_.load(std::memory_order_relaxed);
}

}  // namespace tessera::metrics
