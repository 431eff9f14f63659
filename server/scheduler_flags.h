#pragma once
// The scheduler's flags (tessera-server and tessera-scheduler): leases, heartbeats, the stop
// grace, pre-flight clock skew, node terms and fair share; registered on the command line, then
// turned into SchedulerOptions.

#include <CLI/CLI.hpp>
#include <string>

#include "server/components.h"

namespace tessera::server {

struct SchedulerFlags {
  double lease_seconds = 2.8, heartbeat_seconds = 1, stop_grace_seconds = 10,
         max_clock_skew_seconds = 10;
  std::string fair_share_half_life = "168h";
  bool require_node_terms = false;
};

void AddSchedulerFlags(CLI::App& app, SchedulerFlags& f);

// The options the flags say (every value was checked by CLI11). The database URL and the
// instance id are ServeMain's.
SchedulerOptions FinishSchedulerFlags(const SchedulerFlags& f);

}  // namespace tessera::server
