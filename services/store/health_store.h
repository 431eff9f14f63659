#pragma once
// Health sweeps and their check results (owned by the health API).

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/v1/health.pb.h"

namespace tessera::store {

class HealthStore {
 public:
  virtual ~HealthStore() = default;

  // ALREADY_EXISTS when the id is taken.
  virtual absl::Status CreateSweep(const v1::Sweep& sweep) = 0;
  virtual absl::StatusOr<v1::Sweep> GetSweep(std::string_view id) = 0;
  // NOT_FOUND when absent.
  virtual absl::Status UpdateSweep(const v1::Sweep& sweep) = 0;
  // Newest first.
  virtual absl::StatusOr<std::vector<v1::Sweep>> ListSweeps(int limit) = 0;
  // Removes the oldest sweeps that were created before `before` and are over (passed or failed,
  // not running), with their results, at most `limit` sweeps (the retention of health
  // history); how many sweeps it removed.
  virtual absl::StatusOr<int64_t> DeleteSweepsBefore(absl::Time before, int limit) = 0;

  // Assigns the result an increasing id.
  virtual absl::StatusOr<v1::HealthCheckResult> AddResult(const v1::HealthCheckResult& result) = 0;
  // Newest first; empty node_names or sweep_id means no filter on it; limit 0 means all.
  virtual absl::StatusOr<std::vector<v1::HealthCheckResult>> ListResults(
      const std::vector<std::string>& node_names, std::string_view sweep_id, int limit) = 0;
};

}  // namespace tessera::store
