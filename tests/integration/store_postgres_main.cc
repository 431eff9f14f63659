// Runs the conformance suite against a real PostgreSQL server.
#include "services/store/stores.h"
#include "tests/support/postgres_server.h"
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {

Stores FreshStores() {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  auto stores = OpenPostgresStores({.url = pg.url(), .pool_size = 8});
  REQUIRE(stores.ok());
  return *std::move(stores);
}

}  // namespace tessera::store::conformance
