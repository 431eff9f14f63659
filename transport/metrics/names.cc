#include "transport/metrics/names.h"

#include <cmath>

#include "fmt/format.h"

namespace tessera::metrics {
namespace {

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool IsValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = IsAlpha(c) || c == '_' || c == ':' || (i > 0 && IsDigit(c));
    if (!ok) return false;
  }
  return true;
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = IsAlpha(c) || c == '_' || (i > 0 && IsDigit(c));
    if (!ok) return false;
  }
  return true;
}

absl::Status ValidateMetricName(std::string_view name) {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(
        fmt::format("invalid metric name \"{}\": want [a-zA-Z_:][a-zA-Z0-9_:]*", name));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelNames(std::string_view metric, absl::Span<const std::string> label_names,
                                bool is_histogram) {
  for (std::size_t i = 0; i < label_names.size(); ++i) {
    const std::string& label = label_names[i];
    if (!IsValidLabelName(label)) {
      return absl::InvalidArgumentError(fmt::format(
          "metric {}: invalid label name \"{}\": want [a-zA-Z_][a-zA-Z0-9_]*", metric, label));
    }
    if (label.size() >= 2 && label[0] == '_' && label[1] == '_') {
      return absl::InvalidArgumentError(
          fmt::format("metric {}: label name \"{}\" is reserved (\"__\")", metric, label));
    }
    if (is_histogram && label == "le") {
      return absl::InvalidArgumentError(
          fmt::format("histogram {}: label name \"le\" is reserved for buckets", metric));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (label_names[j] == label) {
        return absl::InvalidArgumentError(
            fmt::format("metric {}: duplicate label name \"{}\"", metric, label));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> NormalizeBuckets(std::string_view metric,
                                                     std::vector<double> bounds) {
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) bounds.pop_back();
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return absl::InvalidArgumentError(
          fmt::format("histogram {}: bucket bound {} is not finite", metric, i));
    }
    if (i > 0 && !(bounds[i] > bounds[i - 1])) {
      return absl::InvalidArgumentError(
          fmt::format("histogram {}: bucket bounds must be strictly increasing ({} then {})",
                      metric, bounds[i - 1], bounds[i]));
    }
  }
  return bounds;
}

}  // namespace tessera::metrics
