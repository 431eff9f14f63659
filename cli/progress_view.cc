#include "cli/progress_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/timestamps.h"
#include "cli/run_view.h"
#include "cli/time_format.h"

namespace tessera::cli {
namespace {

std::string Eta(std::optional<absl::Duration> remaining) {
  return remaining ? "ETA " + FormatSeconds(absl::ToDoubleSeconds(*remaining)) : "ETA -";
}

}  // namespace

std::string FormatFixed(double value, int precision) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", precision, value);
  return text;
}

std::string FormatPercent(double fraction) { return FormatFixed(fraction * 100, 1) + "%"; }

std::optional<absl::Duration> EstimateRemaining(const tessera::v1::RunProgress& progress,
                                                const ProgressOrigin& origin) {
  if (progress.total_steps() <= 0 || !progress.has_reported_at()) return std::nullopt;
  const int64_t done = progress.step() - origin.step;
  const absl::Duration spent = FromProtoTime(progress.reported_at()) - origin.time;
  if (done <= 0 || spent <= absl::ZeroDuration()) return std::nullopt;
  const int64_t left = std::max<int64_t>(0, progress.total_steps() - progress.step());
  return spent * (static_cast<double>(left) / static_cast<double>(done));
}

std::string FormatProgressLine(const tessera::v1::RunProgress& progress,
                               std::optional<absl::Duration> remaining) {
  std::string text = "step " + FormatProgress(progress) + ", loss " +
                     FormatFixed(progress.loss(), 4) + ", " +
                     FormatFixed(progress.tokens_per_second(), 0) + " tokens/s, MFU " +
                     FormatPercent(progress.mfu());
  if (progress.total_steps() > 0) text += ", " + Eta(remaining);
  return text;
}

std::string FormatProgressBar(const tessera::v1::RunProgress& progress,
                              std::optional<absl::Duration> remaining, int width) {
  const bool total = progress.total_steps() > 0;
  const double fraction = total ? std::clamp(static_cast<double>(progress.step()) /
                                                 static_cast<double>(progress.total_steps()),
                                             0.0, 1.0)
                                : 0.0;
  std::string figures = std::to_string(progress.step());
  if (total) {
    figures += "/" + std::to_string(progress.total_steps()) + " " +
               std::to_string(static_cast<int>(std::floor(fraction * 100))) + "%";
  }
  figures += " | loss " + FormatFixed(progress.loss(), 4) + " | " +
             FormatFixed(progress.tokens_per_second(), 0) + " tokens/s";
  if (!total) return figures;
  figures += " | " + Eta(remaining);
  // The bar takes what the figures leave, between 10 and 40 cells; below 10 it goes.
  const int cells = std::min(40, width - static_cast<int>(figures.size()) - 3);
  if (cells < 10) return figures;
  const int filled = static_cast<int>(std::floor(fraction * cells));
  return "[" + std::string(filled, '#') + std::string(cells - filled, '.') + "] " + figures;
}

}  // namespace tessera::cli
