#pragma once
// What tessera-canary measures and how it is judged, without LibTorch: the bandwidth figures as
// nccl-tests computes them and the JSON line the canary prints for its worker.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tessera/v1/health.pb.h"

namespace tessera::canary {

// algbw = bytes / seconds; busbw = algbw * 2(n-1)/n, the bandwidth each link carries in a ring
// all-reduce (so it is comparable across group sizes). In GB/s (1e9 bytes).
v1::BandwidthSample MakeSample(int64_t payload_bytes, double seconds, int ranks);

// The canary's one line of output: a HealthCheckResult as JSON (the worker fills in the node,
// sweep and times).
std::string ResultToJsonLine(const v1::HealthCheckResult& result);
absl::StatusOr<v1::HealthCheckResult> ResultFromJsonLine(const std::string& line);

// Exit codes, so that a person running it by hand can script on them.
inline constexpr int kExitPassed = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitWrongData = 3;
inline constexpr int kExitBelowThreshold = 4;
inline constexpr int kExitTimeout = 5;

}  // namespace tessera::canary
