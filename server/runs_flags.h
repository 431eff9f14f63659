#pragma once
// The run manager's flags about runs and who may have them (tessera-server and tessera-runs):
// registered on the command line, then turned into RunsOptions, with the CA's key and the
// secrets' key loaded from their files.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/components.h"

namespace tessera::server {

struct RunsFlags {
  double node_certificate_days = 30;
  double min_hang_timeout_seconds = 60;
  bool allow_host_image = false;
  double run_retention_days = 0;
  runs::AdmissionPolicy admission;
  std::vector<std::string> high_priority_users, high_priority_teams;
  std::string secrets_key_file;  // empty: the cluster keeps no secrets
  std::string ca_key_file;       // empty: joining nodes get a key but no certificate
};

void AddRunsFlags(CLI::App& app, RunsFlags& f);

// The options the flags say (every value was range-checked by CLI11), with the keys loaded;
// `tls_ca_file` is --tls-ca, the certificate the CA's key goes with. Errors name the flag.
absl::StatusOr<RunsOptions> FinishRunsFlags(const RunsFlags& f, const std::string& tls_ca_file);

}  // namespace tessera::server
