#pragma once
// GPU usage from attempts' real start and end times: what fair share decays and what
// `mcli get usage` sums. Read-only: attempts are written by the run store.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::store {

struct AttemptUsage {
  std::string run_id;
  std::string run_name;
  std::string user;
  std::string team;  // the run's team at submit
  std::string cluster;
  std::string gpu_type;
  int resumption_index = 0;
  int gpus = 0;  // GPUs the attempt held (its nodes' GPU indices)
  absl::Time started_at;
  absl::Time ended_at = absl::InfiniteFuture();  // still running
  v1::AttemptEndReason end_reason = v1::ATTEMPT_END_REASON_UNSPECIFIED;
};

class UsageStore {
 public:
  virtual ~UsageStore() = default;
  // Attempts that started before `until` and ran at some time after `since` (running ones
  // included), ordered by start.
  virtual absl::StatusOr<std::vector<AttemptUsage>> ListAttemptUsage(absl::Time since,
                                                                     absl::Time until) = 0;
};

// What both stores take from an attempt and its run (the attempt's GPUs: its nodes' indices).
AttemptUsage UsageOf(const v1::Run& run, const v1::Attempt& attempt);

}  // namespace tessera::store
