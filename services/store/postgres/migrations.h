#pragma once
// Versioned schema migrations, applied at start and recorded in schema_migrations.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "services/store/postgres/pg_pool.h"

namespace tessera::store {

struct Migration {
  int version;
  std::string name;
  std::string sql;
};

// The migrations compiled into this binary, by increasing version.
const std::vector<Migration>& EmbeddedMigrations();

// Applies every migration the database has not recorded yet, all in one transaction (a failed
// migration leaves the schema as it was) under an advisory lock (so services starting at once
// apply each exactly once).
// FAILED_PRECONDITION when the database holds a version newer than this binary knows.
absl::Status ApplyMigrations(PgPool& pool, const std::vector<Migration>& migrations);

}  // namespace tessera::store
