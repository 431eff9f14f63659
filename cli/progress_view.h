#pragma once
// A run's progress as a person reads it: a bar on a terminal ("[#####.....] 120/1000 12% ...")
// or a plain line elsewhere, with the time left estimated from the attempt's pace.

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::cli {

// `value` with `precision` digits after the point ("2.3457"); FormatPercent(0.41) is "41.0%".
std::string FormatFixed(double value, int precision);
std::string FormatPercent(double fraction);

// Where the pace is measured from: a step and when it was reached (the attempt's start at its
// resumed-from step, or the first report a follower saw).
struct ProgressOrigin {
  int64_t step = 0;
  absl::Time time;
};

// The time left at the pace since `origin`; empty without a total, before any step was made
// since the origin, or when the report is not later than the origin.
std::optional<absl::Duration> EstimateRemaining(const tessera::v1::RunProgress& progress,
                                                const ProgressOrigin& origin);

// "[##########..........] 120/1000 12% | loss 2.3456 | 5000 tokens/s | ETA 1h 2m", fitted into
// `width` columns (the bar shrinks first; without a total there is no bar).
std::string FormatProgressBar(const tessera::v1::RunProgress& progress,
                              std::optional<absl::Duration> remaining, int width);

// "step 120/1000 (12%), loss 2.3456, 5000 tokens/s, MFU 41.0%, ETA 1h 2m": for logs and pipes.
std::string FormatProgressLine(const tessera::v1::RunProgress& progress,
                               std::optional<absl::Duration> remaining);

}  // namespace tessera::cli
