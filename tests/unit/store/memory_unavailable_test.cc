#include <catch2/catch.hpp>

#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace memory_unavailable_test {

TEST_CASE("the memory store can play an unavailable database", "[memory]") {
  auto db = std::make_shared<MemoryDatabase>();
  Stores s = MakeMemoryStores(db);
  v1::Run run;
  run.set_id("r1");
  run.set_name("r1");
  REQUIRE(s.runs->CreateRun(run, {}).ok());
  REQUIRE(s.leader_locks->TryAcquire("scheduler", "a")->has_value());

  db->SetUnavailable(true);
  CHECK(absl::IsUnavailable(s.runs->GetRun("r1").status()));
  CHECK(absl::IsUnavailable(s.nodes->ListNodes({}).status()));
  CHECK(absl::IsUnavailable(s.node_events->ListNodeEvents({}).status()));
  CHECK(absl::IsUnavailable(s.health->ListSweeps(0).status()));
  CHECK(absl::IsUnavailable(s.api_keys->ListKeys("").status()));
  CHECK(absl::IsUnavailable(s.idempotency->Lookup("a", "b").status()));
  CHECK(absl::IsUnavailable(s.leader_locks->TryAcquire("scheduler", "b").status()));
  // The holder's session broke with the database, as its connection to PostgreSQL would.
  CHECK(absl::IsUnavailable(s.leader_locks->CheckHeld("scheduler", "a")));

  db->SetUnavailable(false);
  CHECK(s.runs->GetRun("r1").ok());
  CHECK(absl::IsFailedPrecondition(s.leader_locks->CheckHeld("scheduler", "a")));
  CHECK(s.leader_locks->TryAcquire("scheduler", "b")->has_value());
}

}  // namespace memory_unavailable_test
}  // namespace tessera::store
