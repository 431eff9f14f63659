// Health sweeps and results, API keys and idempotency records.
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace health_keys_conformance {

v1::Sweep MakeSweep(const std::string& id, int64_t second) {
  v1::Sweep sweep;
  sweep.set_id(id);
  sweep.set_trigger(v1::SWEEP_TRIGGER_ON_DEMAND);
  sweep.set_state(v1::SWEEP_STATE_RUNNING);
  sweep.add_node_names("n1");
  sweep.add_node_names("n2");
  *sweep.mutable_created_at() = ToProtoTime(T(second));
  return sweep;
}

CONFORMANCE_CASE("health: sweeps are created, updated and listed newest first") {
  Stores s = FreshStores();
  REQUIRE(s.health->CreateSweep(MakeSweep("s1", 1)).ok());
  REQUIRE(s.health->CreateSweep(MakeSweep("s2", 2)).ok());
  CHECK(absl::IsAlreadyExists(s.health->CreateSweep(MakeSweep("s1", 3))));

  v1::Sweep done = MakeSweep("s1", 1);
  done.set_state(v1::SWEEP_STATE_FINISHED);
  done.add_anomalous_nodes("n2");
  REQUIRE(s.health->UpdateSweep(done).ok());
  auto got = s.health->GetSweep("s1");
  REQUIRE(got.ok());
  CHECK(got->state() == v1::SWEEP_STATE_FINISHED);
  CHECK(got->anomalous_nodes(0) == "n2");
  CHECK(absl::IsNotFound(s.health->GetSweep("s9").status()));
  CHECK(absl::IsNotFound(s.health->UpdateSweep(MakeSweep("s9", 1))));

  auto sweeps = s.health->ListSweeps(0);
  REQUIRE(sweeps.ok());
  REQUIRE(sweeps->size() == 2);
  CHECK((*sweeps)[0].id() == "s2");
  CHECK(s.health->ListSweeps(1)->size() == 1);
}

CONFORMANCE_CASE("health: results get increasing ids and filter by node and sweep") {
  Stores s = FreshStores();
  int64_t last_id = 0;
  for (const auto& [sweep, node] :
       std::vector<std::pair<std::string, std::string>>{{"s1", "n1"}, {"s1", "n2"}, {"s2", "n1"}}) {
    v1::HealthCheckResult r;
    r.set_sweep_id(sweep);
    r.set_node_name(node);
    r.set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
    r.set_verdict(node == "n2" ? v1::HEALTH_VERDICT_SLOW : v1::HEALTH_VERDICT_PASSED);
    auto* sample = r.add_samples();
    sample->set_payload_bytes(1 << 20);
    sample->set_busbw_gbps(node == "n2" ? 2.0 : 10.0);
    auto stored = s.health->AddResult(r);
    REQUIRE(stored.ok());
    CHECK(stored->id() > last_id);
    last_id = stored->id();
  }
  auto all = s.health->ListResults({}, "", 0);
  REQUIRE(all.ok());
  REQUIRE(all->size() == 3);
  CHECK((*all)[0].sweep_id() == "s2");  // newest first
  auto n1 = s.health->ListResults({"n1"}, "", 0);
  REQUIRE(n1.ok());
  CHECK(n1->size() == 2);
  auto s1 = s.health->ListResults({}, "s1", 0);
  REQUIRE(s1.ok());
  REQUIRE(s1->size() == 2);
  CHECK((*s1)[0].node_name() == "n2");
  CHECK((*s1)[0].verdict() == v1::HEALTH_VERDICT_SLOW);
  CHECK((*s1)[0].samples(0).busbw_gbps() == 2.0);
  CHECK(s.health->ListResults({"n1", "n2"}, "s1", 1)->size() == 1);
}

ApiKeyRecord MakeKey(const std::string& id, const std::string& user, const std::string& hash,
                     int64_t second) {
  ApiKeyRecord r;
  r.key.set_id(id);
  r.key.set_user(user);
  r.key.set_role(user == "root" ? v1::ROLE_ADMIN : v1::ROLE_USER);
  *r.key.mutable_created_at() = ToProtoTime(T(second));
  r.secret_hash = hash;
  return r;
}

CONFORMANCE_CASE("api keys: found by hash, listed per user, revoked") {
  Stores s = FreshStores();
  REQUIRE(s.api_keys->CreateKey(MakeKey("k1", "alice", "hash-1", 1)).ok());
  REQUIRE(s.api_keys->CreateKey(MakeKey("k2", "root", "hash-2", 2)).ok());
  REQUIRE(s.api_keys->CreateKey(MakeKey("k3", "alice", "hash-3", 3)).ok());
  CHECK(absl::IsAlreadyExists(s.api_keys->CreateKey(MakeKey("k4", "bob", "hash-1", 4))));
  CHECK(absl::IsAlreadyExists(s.api_keys->CreateKey(MakeKey("k1", "bob", "hash-9", 4))));

  auto found = s.api_keys->FindByHash("hash-2");
  REQUIRE(found.ok());
  CHECK(found->key.user() == "root");
  CHECK(found->key.role() == v1::ROLE_ADMIN);
  CHECK(found->secret_hash == "hash-2");
  CHECK(absl::IsNotFound(s.api_keys->FindByHash("hash-x").status()));

  auto alice = s.api_keys->ListKeys("alice");
  REQUIRE(alice.ok());
  REQUIRE(alice->size() == 2);
  CHECK((*alice)[0].id() == "k1");
  CHECK(s.api_keys->ListKeys("")->size() == 3);

  REQUIRE(s.api_keys->RevokeKey("k1").ok());
  CHECK(s.api_keys->FindByHash("hash-1")->key.revoked());
  CHECK(s.api_keys->ListKeys("alice")->at(0).revoked());
  CHECK(absl::IsNotFound(s.api_keys->RevokeKey("k9")));
}

CONFORMANCE_CASE("idempotency: the first response is kept per scope and key; purge by age") {
  Stores s = FreshStores();
  auto none = s.idempotency->Lookup("SubmitRun", "req-1");
  REQUIRE(none.ok());
  CHECK(!none->has_value());

  const std::string binary("\x00\x01\xffresponse", 11);
  REQUIRE(s.idempotency->Record("SubmitRun", "req-1", {"fp-1", binary}, T(10)).ok());
  CHECK(
      absl::IsAlreadyExists(s.idempotency->Record("SubmitRun", "req-1", {"fp-2", "other"}, T(11))));
  REQUIRE(s.idempotency->Record("StopRun", "req-1", {"fp-3", "stop"}, T(20)).ok());

  auto got = s.idempotency->Lookup("SubmitRun", "req-1");
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK((*got)->request_fingerprint == "fp-1");
  CHECK((*got)->response == binary);
  CHECK((*s.idempotency->Lookup("StopRun", "req-1"))->response == "stop");

  auto purged = s.idempotency->Purge(T(15));
  REQUIRE(purged.ok());
  CHECK(*purged == 1);
  CHECK(!s.idempotency->Lookup("SubmitRun", "req-1")->has_value());
  CHECK(s.idempotency->Lookup("StopRun", "req-1")->has_value());
}

}  // namespace health_keys_conformance
}  // namespace tessera::store::conformance
