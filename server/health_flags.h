#pragma once
// The health API's flags (tessera-server and tessera-health): registered on the command line,
// then checked and turned into HealthOptions.

#include <CLI/CLI.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "server/components.h"

namespace tessera::server {

struct HealthFlags {
  HealthOptions options;
  double sweep_interval_seconds = 0, sweep_retention_days = 0, canary_timeout_seconds = 60;
  std::string canary_sizes, canary_ports;
};

void AddHealthFlags(CLI::App& app, HealthFlags& f);

// The options, or an error naming the flag that is wrong.
absl::StatusOr<HealthOptions> FinishHealthFlags(HealthFlags f);

}  // namespace tessera::server
