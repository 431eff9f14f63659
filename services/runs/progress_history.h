#pragma once
// Which progress reports an attempt's history keeps, so that a million-step run stays small: at
// most kMaxProgressBuckets buckets of `stride` steps (a power of two that doubles as the attempt
// goes on), the earliest report of each bucket, and the latest report. When the stride doubles,
// the points that are no longer the earliest of their (wider) bucket are dropped, so the points
// kept stay evenly spread over the whole attempt.

#include <cstdint>
#include <optional>

namespace tessera::runs {

inline constexpr int64_t kMaxProgressBuckets = 2000;

// The smallest power of two s with step < kMaxProgressBuckets * s.
int64_t ProgressStride(int64_t step);

// What the store is asked to do with a report (RunStore::AddProgressPoint's arguments).
struct ProgressKeep {
  int64_t stride = 1;
  // Points at or after this step (and before the report's) are thinned to the stride: only the
  // previous report's when the stride is unchanged (every point before it was already thinned),
  // all of them when the stride grew.
  int64_t thin_from = 0;
};

// For a report at `step` of an attempt whose latest report was at `previous_step` (0 before its
// first: there is nothing to thin then). Empty when the report is not kept: a negative step, or
// one lower than the attempt's latest (a late report).
std::optional<ProgressKeep> KeepProgress(int64_t previous_step, int64_t step);

}  // namespace tessera::runs
