// A control-plane process's own key: short-lived, rotated, the replaced key revoked one rotation
// later, everything revoked at exit (fake clock, memory stores).
#include "services/common/auth/system_keys.h"

#include <catch2/catch.hpp>

#include "services/common/auth/api_keys.h"
#include "services/store/memory/memory_database.h"
#include "services/store/stores.h"

namespace tessera::auth {
namespace system_keys_test {

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  Authenticator auth{stores.api_keys, clock, absl::ZeroDuration()};

  bool Works(const std::string& secret) { return auth.Authenticate("Bearer " + secret).ok(); }
};

TEST_CASE("a system key expires, is rotated every third of its life, and the old one revoked") {
  Fixture f;
  auto keys = SystemKeys::Create(f.stores.api_keys, f.clock, "tessera-runs", absl::Minutes(60));
  REQUIRE(keys.ok());
  const SystemCredential credential = (*keys)->credential();
  const std::string first = credential.secret();
  auto who = f.auth.Authenticate("Bearer " + first);
  REQUIRE(who.ok());
  CHECK(who->role == v1::ROLE_SYSTEM);
  CHECK(who->user == "tessera-runs");

  // Not due yet.
  f.clock->Advance(absl::Minutes(19));
  (*keys)->Tick();
  CHECK(credential.secret() == first);
  // Due: a new key; the first still works (calls in flight may carry it) until the next rotation.
  f.clock->Advance(absl::Minutes(2));
  (*keys)->Tick();
  const std::string second = credential.secret();
  CHECK(second != first);
  CHECK(f.Works(second));
  CHECK(f.Works(first));
  f.clock->Advance(absl::Minutes(21));
  (*keys)->Tick();
  const std::string third = credential.secret();
  CHECK(third != second);
  CHECK_FALSE(f.Works(first));  // revoked
  CHECK(f.Works(second));
  CHECK(f.Works(third));

  // Every key expires on its own (a process killed with SIGKILL revokes nothing).
  auto listed = f.stores.api_keys->ListKeys("tessera-runs");
  REQUIRE(listed.ok());
  for (const auto& k : *listed) CHECK(k.has_expires_at());

  keys->reset();  // a clean exit
  CHECK_FALSE(f.Works(second));
  CHECK_FALSE(f.Works(third));
}

TEST_CASE("a rotation that fails is tried again at the next tick, the current key kept") {
  Fixture f;
  auto db = std::make_shared<store::MemoryDatabase>();
  auto stores = store::MakeMemoryStores(db);
  Authenticator auth{stores.api_keys, f.clock, absl::ZeroDuration()};
  auto keys = SystemKeys::Create(stores.api_keys, f.clock, "tessera-server", absl::Minutes(30));
  REQUIRE(keys.ok());
  const std::string first = (*keys)->credential().secret();
  f.clock->Advance(absl::Minutes(11));
  db->SetUnavailable(true);
  (*keys)->Tick();
  CHECK((*keys)->credential().secret() == first);
  db->SetUnavailable(false);
  f.clock->Advance(absl::Seconds(10));
  (*keys)->Tick();
  CHECK((*keys)->credential().secret() != first);
  CHECK(auth.Authenticate("Bearer " + (*keys)->credential().secret()).ok());
}

}  // namespace system_keys_test
}  // namespace tessera::auth
