#pragma once
// Reading a registry's series in tests: the value of a counter or gauge, or a histogram's count
// or sum, by family name and exact label values.

#include <optional>
#include <string>
#include <vector>

#include "transport/metrics/registry.h"

namespace tessera::testing {

enum class HistogramPart { kCount, kSum };

// Empty when the family has no series with exactly `labels`.
inline std::optional<double> MetricValue(const metrics::Registry& registry, const std::string& name,
                                         const std::vector<std::string>& labels = {},
                                         HistogramPart part = HistogramPart::kCount) {
  for (const auto& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const auto& m : family.metrics) {
      if (m.label_values != labels) continue;
      if (family.type != metrics::MetricType::kHistogram) return m.value;
      return part == HistogramPart::kCount ? static_cast<double>(m.count) : m.sum;
    }
  }
  return std::nullopt;
}

}  // namespace tessera::testing
