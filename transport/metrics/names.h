#pragma once
// Validation of metric names, label names and histogram buckets against the Prometheus data model.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tessera::metrics {

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*
bool IsValidLabelName(std::string_view name);

absl::Status ValidateMetricName(std::string_view name);
// Each name valid, not reserved (a leading "__"), no duplicates; "le" is refused for histograms.
absl::Status ValidateLabelNames(std::string_view metric, absl::Span<const std::string> label_names,
                                bool is_histogram);
// Finite and strictly increasing; a trailing +Inf is accepted and dropped (it is implicit).
absl::StatusOr<std::vector<double>> NormalizeBuckets(std::string_view metric,
                                                     std::vector<double> bounds);

}  // namespace tessera::metrics
