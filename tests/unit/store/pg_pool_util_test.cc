#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "services/store/postgres/pg_pool.h"
#include "services/store/stores.h"

namespace tessera::store {
namespace pg_pool_util_test {

TEST_CASE("connect_timeout is added once to URLs and key=value strings", "[postgres]") {
  CHECK(WithConnectTimeout("postgresql://u@h:1/db", 3) ==
        "postgresql://u@h:1/db?connect_timeout=3");
  CHECK(WithConnectTimeout("postgresql://u@h:1/db?sslmode=disable", 2) ==
        "postgresql://u@h:1/db?sslmode=disable&connect_timeout=2");
  CHECK(WithConnectTimeout("host=h port=1", 5) == "host=h port=1 connect_timeout=5");
  CHECK(WithConnectTimeout("host=h connect_timeout=9", 5) == "host=h connect_timeout=9");
}

TEST_CASE("connection parameters are added unless the operator set them", "[postgres]") {
  CHECK(WithConnParam("postgresql://a,b/db?target_session_attrs=read-write", "keepalives", "1") ==
        "postgresql://a,b/db?target_session_attrs=read-write&keepalives=1");
  // keepalives_idle is another parameter than keepalives.
  CHECK(WithConnParam("host=h keepalives_idle=9", "keepalives", "1") ==
        "host=h keepalives_idle=9 keepalives=1");
  CHECK(WithConnParam("host=h keepalives_idle=9", "keepalives_idle", "2") ==
        "host=h keepalives_idle=9");
}

TEST_CASE("array literals quote and escape their elements", "[postgres]") {
  CHECK(PgTextArray({}) == "{}");
  CHECK(PgTextArray({"a", "b c", "q\"uote", "back\\slash", "{x,y}"}) ==
        "{\"a\",\"b c\",\"q\\\"uote\",\"back\\\\slash\",\"{x,y}\"}");
  CHECK(PgIntArray({1, 2, 3}) == "{1,2,3}");
}

TEST_CASE("an unreachable server is UNAVAILABLE, promptly, not a crash", "[postgres]") {
  // Port 1 on loopback refuses connections at once.
  const absl::Time start = absl::Now();
  auto stores = OpenPostgresStores({.url = "postgresql://tessera@127.0.0.1:1/tessera"});
  CHECK(absl::IsUnavailable(stores.status()));
  CHECK(stores.status().message().find("database unavailable") != std::string::npos);
  CHECK(absl::Now() - start < absl::Seconds(5));
}

}  // namespace pg_pool_util_test
}  // namespace tessera::store
