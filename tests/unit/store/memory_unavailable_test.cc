#include <catch2/catch.hpp>

#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

TEST_CASE("the memory store can play an unavailable database", "[memory]") {
  auto db = std::make_shared<MemoryDatabase>();
  Stores s = MakeMemoryStores(db);
  v1::Run run;
  run.set_id("r1");
  run.set_name("r1");
  REQUIRE(s.runs->CreateRun(run, {}).ok());

  db->SetUnavailable(true);
  CHECK(absl::IsUnavailable(s.runs->GetRun("r1").status()));
  CHECK(absl::IsUnavailable(s.nodes->ListNodes({}).status()));
  CHECK(absl::IsUnavailable(s.node_events->ListNodeEvents({}).status()));
  CHECK(absl::IsUnavailable(s.health->ListSweeps(0).status()));
  CHECK(absl::IsUnavailable(s.api_keys->ListKeys("").status()));
  CHECK(absl::IsUnavailable(s.idempotency->Lookup("a", "b").status()));

  db->SetUnavailable(false);
  CHECK(s.runs->GetRun("r1").ok());
}

}  // namespace
}  // namespace tessera::store
