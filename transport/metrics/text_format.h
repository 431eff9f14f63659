#pragma once
// The Prometheus text exposition format, version 0.0.4.
// https://prometheus.io/docs/instrumenting/exposition_formats/

#include <string>
#include <string_view>

#include "absl/types/span.h"
#include "transport/metrics/metric.h"

namespace tessera::metrics {

class Registry;

// The Content-Type of RenderText's output.
inline constexpr std::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// Renders families in the order given (Registry::Collect sorts them by name).
std::string RenderText(absl::Span<const FamilySnapshot> families);
// Renders every family of `registry`.
std::string RenderText(const Registry& registry);

// A sample value: integers without exponent or fraction ("42"), otherwise the shortest text that
// reads back to the same double ("0.0005", "1e+20"); "+Inf", "-Inf", "NaN".
std::string FormatValue(double v);
// HELP text: backslash and newline escaped.
std::string EscapeHelp(std::string_view help);
// A label value: backslash, double quote and newline escaped.
std::string EscapeLabelValue(std::string_view value);

}  // namespace tessera::metrics
