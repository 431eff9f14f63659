// Runs the conformance suite against a real PostgreSQL server.
#include <chrono>
#include <pqxx/pqxx>
#include <thread>

#include "services/store/postgres/pg_stores.h"
#include "services/store/stores.h"
#include "tests/support/postgres_server.h"
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {

Stores FreshStores() {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  return SameDatabaseStores();
}

Stores SameDatabaseStores() {
  auto stores = OpenPostgresStores({.url = testing::SharedPostgres().url(), .pool_size = 8});
  REQUIRE(stores.ok());
  return *std::move(stores);
}

// Each contender's session is a connection of its own. The server ends the one that holds the
// role's advisory lock, as when its connection breaks (the cases end only holders' sessions, so
// the lock's holder is `instance`).
void EndLeaderSession(std::string_view role, std::string_view /*instance*/) {
  const uint64_t key = static_cast<uint64_t>(PgLeaderLockKey(role));
  const int64_t high = static_cast<int64_t>(key >> 32),
                low = static_cast<int64_t>(key & 0xffffffff);
  // A bigint advisory key shows in pg_locks as classid (high half), objid (low half), objsubid 1.
  const std::string holders =
      "FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
      " AND classid::bigint = $1 AND objid::bigint = $2"
      " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";
  pqxx::connection conn(testing::SharedPostgres().url());
  pqxx::nontransaction tx(conn);
  const pqxx::result ended =
      tx.exec_params("SELECT pg_terminate_backend(pid) " + holders, high, low);
  REQUIRE(ended.size() == 1);
  // The backend frees its locks as it exits, a moment after it was told to.
  for (int i = 0; i < 500; ++i) {
    if (tx.exec_params("SELECT count(*) " + holders, high, low)[0][0].as<int>() == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL("the holder of the " << std::string(role) << " lock did not exit");
}

}  // namespace tessera::store::conformance
