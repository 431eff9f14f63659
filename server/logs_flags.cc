#include "server/logs_flags.h"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/byte_size.h"

namespace tessera::server {

void AddLogsFlags(CLI::App& app, LogsFlags& f) {
  app.add_option("--logs-database-url", f.database_url,
                 "a PostgreSQL of their own for rank output (lines, quotas, followers' "
                 "notifications); keys, runs and the rest stay in --database-url (default: "
                 "that one)")
      ->envname("TESSERA_LOGS_DATABASE_URL");
  app.add_option("--log-rate-per-run", f.rate,
                 "bytes of log text per second a run may print, over all its ranks, with "
                 "bursts of 10 s (0: no limit); lines over it are dropped with a marker line")
      ->capture_default_str();
  app.add_option("--log-quota-per-run", f.quota,
                 "bytes of log text kept per run, every attempt (0: no limit)")
      ->capture_default_str();
  app.add_option("--log-retention-days", f.retention_days,
                 "remove a finished run's logs this many days after its last line (0: keep "
                 "them until the run is deleted)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 36500.0));
}

absl::StatusOr<LogsOptions> FinishLogsFlags(const LogsFlags& f, const store::PostgresOptions& db) {
  LogsOptions o;
  o.retention = absl::Seconds(f.retention_days * 86400);
  o.retention_check = RetentionCheckInterval(o.retention);
  for (const auto& [flag, text, into] :
       {std::tuple<const char*, const std::string&, int64_t*>{"--log-rate-per-run", f.rate,
                                                              &o.quota.bytes_per_second},
        {"--log-quota-per-run", f.quota, &o.quota.max_bytes}}) {
    if (text == "0") {
      *into = 0;
      continue;
    }
    auto size = ParseByteSize(text);
    if (!size.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", size.status().message()));
    }
    *into = *size;
  }
  if (!f.database_url.empty()) {
    store::PostgresOptions logs_db = db;
    logs_db.url = f.database_url;
    auto stores = store::OpenPostgresStores(logs_db);
    if (!stores.ok()) {
      return absl::Status(stores.status().code(), absl::StrCat("cannot open the logs database: ",
                                                               stores.status().message()));
    }
    o.store = stores->logs;
    o.changes = stores->changes;
  }
  return o;
}

}  // namespace tessera::server
