#pragma once
// The scheduler's flags (tessera-server and tessera-scheduler): leases, heartbeats, the stop
// grace, pre-flight clock skew, node terms, fair share, shrinking runs and hot spares; registered
// on the command line, then turned into SchedulerOptions.

#include <CLI/CLI.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "server/components.h"

namespace tessera::server {

struct SchedulerFlags {
  double lease_seconds = 2.8, loss_seconds = 0, heartbeat_seconds = 1, stop_grace_seconds = 10,
         max_clock_skew_seconds = 10, shrink_after_seconds = 60;
  std::string fair_share_half_life = "168h";
  bool require_node_terms = false;
  int spare_nodes_per_pool = 0;
};

void AddSchedulerFlags(CLI::App& app, SchedulerFlags& f);

// The options the flags say (each value was checked by CLI11; INVALID_ARGUMENT for a loss lease
// longer than the lease, or not longer than a heartbeat). The database URL and the instance id
// are ServeMain's.
absl::StatusOr<SchedulerOptions> FinishSchedulerFlags(const SchedulerFlags& f);

}  // namespace tessera::server
