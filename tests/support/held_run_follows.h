#pragma once
// What bench_control_plane --follows and --watches hold open: many log follows, through the REST
// gateway, of one run that the simulated fleet keeps running (SimFleetOptions::held_run_prefix),
// and many watches of the runs' changes.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tests/support/sse_followers.h"

namespace tessera::testing {

// Submits a run named `spec_name` (of `gpus` GPUs, on cluster "local") with `api_key`, waits
// until it runs, opens `count` follows of it on the gateway at 127.0.0.1:`http_port`, and
// returns once `following()` (the log service's count of follows past their first read) reaches
// `count`: open at the gateway is not yet following, and a benchmark measures open follows, not
// their opening.
absl::StatusOr<std::unique_ptr<SseFollowers>> FollowHeldRun(
    v1::RunService::Stub& runs, const std::string& api_key, const std::string& spec_name, int gpus,
    int http_port, int count, const std::function<double()>& following);

// Opens `count` watches of the runs' changes (`GET /api/v1/runs/watch`) on the gateway at
// 127.0.0.1:`http_port` with `api_key`; returns once each one's start is fixed (its headers came).
absl::StatusOr<std::unique_ptr<SseFollowers>> WatchRunChanges(int http_port,
                                                              const std::string& api_key,
                                                              int count);

}  // namespace tessera::testing
