#pragma once
// What a node's worker may push logs for: attempts placed on that node. A node key is bound to
// one node (auth::Principal::node); the lines it pushes for any other attempt are not stored.
// Placements never change once recorded, so each (run, attempt) is asked of the run manager once.

#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/logs/run_lookup.h"

namespace tessera::logs {

class NodePlacements {
 public:
  explicit NodePlacements(std::shared_ptr<RunLookup> runs) : runs_(std::move(runs)) {}

  // Whether attempt `resumption_index` of run `run_id` was placed on `node`. False for a run
  // that does not exist (deleted since); UNAVAILABLE when the run manager cannot be asked.
  absl::StatusOr<bool> PlacedOn(const std::string& run_id, int resumption_index,
                                const std::string& node);

 private:
  using Attempt = std::pair<std::string, int>;
  std::shared_ptr<RunLookup> runs_;
  absl::Mutex mu_;
  // The nodes of each attempt asked about; cleared when it grows past a bound.
  absl::flat_hash_map<Attempt, std::set<std::string>> nodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::logs
