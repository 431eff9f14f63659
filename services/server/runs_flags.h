#pragma once
// The run manager's flags about runs and who may have them (tessera-server and tessera-runs):
// registered on the command line, then turned into RunsOptions. The CA and the secrets' key,
// which are files to load, stay with ServeMain.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "services/server/components.h"

namespace tessera::server {

struct RunsFlags {
  double node_certificate_days = 30;
  double min_hang_timeout_seconds = 60;
  bool allow_host_image = false;
  double run_retention_days = 0;
  runs::AdmissionPolicy admission;
  std::vector<std::string> high_priority_users, high_priority_teams;
};

void AddRunsFlags(CLI::App& app, RunsFlags& f);

// The options the flags say (every value was range-checked by CLI11).
RunsOptions FinishRunsFlags(const RunsFlags& f);

}  // namespace tessera::server
