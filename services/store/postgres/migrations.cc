#include "services/store/postgres/migrations.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace tessera::store {
namespace {
// An arbitrary constant identifying Tessera's migration lock among advisory locks.
constexpr int64_t kMigrationLockKey = 0x7e55e7a0001;
}  // namespace

absl::Status ApplyMigrations(PgPool& pool, const std::vector<Migration>& migrations) {
  int known_max = 0;
  for (const auto& m : migrations) known_max = std::max(known_max, m.version);
  int applied_count = 0;
  absl::Status st = pool.Transact("applying migrations", [&](pqxx::work& tx) -> absl::Status {
    // The lock is released at the end of the transaction; every migration runs inside it.
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", kMigrationLockKey);
    tx.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version integer PRIMARY KEY,"
        " name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())");
    std::set<int> applied;
    for (const auto& row : tx.exec("SELECT version FROM schema_migrations")) {
      applied.insert(row[0].as<int>());
    }
    if (!applied.empty() && *applied.rbegin() > known_max) {
      return absl::FailedPreconditionError(
          absl::StrCat("the database schema is at version ", *applied.rbegin(),
                       ", newer than this binary knows (", known_max, "); upgrade the binary"));
    }
    for (const auto& m : migrations) {
      if (applied.count(m.version)) continue;
      spdlog::info("applying database migration {} ({})", m.version, m.name);
      tx.exec(m.sql);
      tx.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version,
                     m.name);
      ++applied_count;
    }
    return absl::OkStatus();
  });
  if (st.ok() && applied_count > 0) {
    spdlog::info("database schema now at version {}", known_max);
  }
  return st;
}

}  // namespace tessera::store
