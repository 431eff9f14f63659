#pragma once
// The log service's flags (tessera-server and tessera-logs): a database of the logs' own, each
// run's rate and quota of log text, and how long finished runs' logs are kept; registered on the
// command line, then checked and turned into LogsOptions.

#include <CLI/CLI.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "server/components.h"
#include "services/store/stores.h"

namespace tessera::server {

struct LogsFlags {
  std::string database_url;  // --logs-database-url; empty: the services' database
  std::string rate = "16MiB", quota = "10GiB";
  double retention_days = 0;
};

void AddLogsFlags(CLI::App& app, LogsFlags& f);

// The options, or an error naming the flag that is wrong. A database of the logs' own is opened
// with `db`'s settings (its pool size and observer).
absl::StatusOr<LogsOptions> FinishLogsFlags(const LogsFlags& f, const store::PostgresOptions& db);

}  // namespace tessera::server
