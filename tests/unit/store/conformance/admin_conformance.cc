// Join tokens and the audit log.
#include <map>

#include "services/store/filters.h"
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace admin_conformance {

JoinTokenRecord MakeToken(const std::string& id, const std::string& node, int64_t created,
                          int64_t expires) {
  JoinTokenRecord r;
  r.token.set_id(id);
  r.token.set_node(node);
  r.token.set_created_by("admin");
  *r.token.mutable_created_at() = ToProtoTime(T(created));
  *r.token.mutable_expires_at() = ToProtoTime(T(expires));
  r.secret_hash = "hash-" + id;
  return r;
}

ApiKeyRecord MakeNodeKey(const std::string& id, const std::string& node) {
  ApiKeyRecord k;
  k.key.set_id(id);
  k.key.set_user(node);
  k.key.set_role(v1::ROLE_NODE);
  k.key.set_node(node);
  *k.key.mutable_created_at() = ToProtoTime(T(10));
  k.secret_hash = "key-hash-" + id;
  return k;
}

CONFORMANCE_CASE("join tokens: made, listed newest first, revoked") {
  Stores s = FreshStores();
  REQUIRE(s.join_tokens->CreateJoinToken(MakeToken("t1", "n1", 1, 100)).ok());
  REQUIRE(s.join_tokens->CreateJoinToken(MakeToken("t2", "n2", 2, 100)).ok());
  CHECK(absl::IsAlreadyExists(s.join_tokens->CreateJoinToken(MakeToken("t1", "n3", 3, 100))));
  auto same_hash = MakeToken("t3", "n3", 3, 100);
  same_hash.secret_hash = "hash-t1";
  CHECK(absl::IsAlreadyExists(s.join_tokens->CreateJoinToken(same_hash)));

  auto listed = s.join_tokens->ListJoinTokens();
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].id() == "t2");
  CHECK((*listed)[1].node() == "n1");

  // Found by the hash of its secret, as it is.
  auto found = s.join_tokens->FindJoinToken("hash-t2");
  REQUIRE(found.ok());
  CHECK(found->id() == "t2");
  CHECK(found->node() == "n2");
  CHECK_FALSE(found->has_used_at());
  CHECK(absl::IsUnauthenticated(s.join_tokens->FindJoinToken("hash-t9").status()));

  REQUIRE(s.join_tokens->RevokeJoinToken("t1").ok());
  CHECK(s.join_tokens->FindJoinToken("hash-t1")->revoked());
  CHECK(absl::IsNotFound(s.join_tokens->RevokeJoinToken("t9")));
  listed = s.join_tokens->ListJoinTokens();
  REQUIRE(listed.ok());
  CHECK((*listed)[1].revoked());
}

CONFORMANCE_CASE("join tokens: used once, for their node, before they expire") {
  Stores s = FreshStores();
  REQUIRE(s.join_tokens->CreateJoinToken(MakeToken("t1", "n1", 1, 100)).ok());
  REQUIRE(s.join_tokens->CreateJoinToken(MakeToken("t2", "n2", 1, 50)).ok());
  REQUIRE(s.join_tokens->CreateJoinToken(MakeToken("t3", "n3", 1, 100)).ok());
  REQUIRE(s.join_tokens->RevokeJoinToken("t3").ok());

  // An unknown secret, another node's token, an expired and a revoked one: nothing is made.
  CHECK(absl::IsUnauthenticated(
      s.join_tokens->RedeemJoinToken("nope", "n1", T(20), MakeNodeKey("k0", "n1")).status()));
  auto other = s.join_tokens->RedeemJoinToken("hash-t1", "n2", T(20), MakeNodeKey("k0", "n2"));
  CHECK(absl::IsPermissionDenied(other.status()));
  CHECK(other.status().message().find("is for node \"n1\"") != std::string::npos);
  CHECK(absl::IsPermissionDenied(
      s.join_tokens->RedeemJoinToken("hash-t2", "n2", T(60), MakeNodeKey("k0", "n2")).status()));
  CHECK(absl::IsPermissionDenied(
      s.join_tokens->RedeemJoinToken("hash-t3", "n3", T(20), MakeNodeKey("k0", "n3")).status()));
  CHECK(s.api_keys->ListKeys("")->empty());

  auto used = s.join_tokens->RedeemJoinToken("hash-t1", "n1", T(20), MakeNodeKey("k1", "n1"));
  REQUIRE(used.ok());
  CHECK(used->key_id() == "k1");
  CHECK(ToMicros(used->used_at()) == absl::ToUnixMicros(T(20)));
  auto key = s.api_keys->FindByHash("key-hash-k1");
  REQUIRE(key.ok());
  CHECK(key->key.node() == "n1");
  CHECK_FALSE(key->key.revoked());

  // Once only.
  auto again = s.join_tokens->RedeemJoinToken("hash-t1", "n1", T(21), MakeNodeKey("k2", "n1"));
  CHECK(absl::IsPermissionDenied(again.status()));
  CHECK(again.status().message().find("already used") != std::string::npos);
  CHECK(absl::IsNotFound(s.api_keys->FindByHash("key-hash-k2").status()));
  auto listed = s.join_tokens->ListJoinTokens();
  REQUIRE(listed.ok());
  for (const auto& t : *listed) {
    if (t.id() == "t1") CHECK(t.key_id() == "k1");
  }
}

CONFORMANCE_CASE("join tokens: joining again revokes the node's earlier keys") {
  Stores s = FreshStores();
  REQUIRE(s.api_keys->CreateKey(MakeNodeKey("old", "n1")).ok());
  REQUIRE(s.api_keys->CreateKey(MakeNodeKey("other", "n2")).ok());
  REQUIRE(s.join_tokens->CreateJoinToken(MakeToken("t1", "n1", 1, 100)).ok());
  auto made = MakeNodeKey("new", "n1");
  made.key.mutable_node_terms()->set_cluster("pool-a");  // the token's terms, on its key
  (*made.key.mutable_node_terms()->mutable_labels())["team"] = "ml";
  REQUIRE(s.join_tokens->RedeemJoinToken("hash-t1", "n1", T(20), made).ok());
  CHECK(s.api_keys->FindByHash("key-hash-old")->key.revoked());
  auto found = s.api_keys->FindByHash("key-hash-new");
  REQUIRE(found.ok());
  CHECK_FALSE(found->key.revoked());
  CHECK(found->key.node_terms().cluster() == "pool-a");
  CHECK(found->key.node_terms().labels().at("team") == "ml");
  CHECK_FALSE(s.api_keys->FindByHash("key-hash-other")->key.revoked());
}

CONFORMANCE_CASE("join tokens: the one a node used last is found, with its terms") {
  Stores s = FreshStores();
  CHECK(absl::IsNotFound(s.join_tokens->FindLastUsedJoinToken("n1").status()));
  auto first = MakeToken("t1", "n1", 1, 100);
  first.token.mutable_terms()->set_cluster("pool-a");
  REQUIRE(s.join_tokens->CreateJoinToken(first).ok());
  auto second = MakeToken("t2", "n1", 2, 100);
  second.token.mutable_terms()->set_cluster("pool-b");
  (*second.token.mutable_terms()->mutable_labels())["team"] = "ml";
  REQUIRE(s.join_tokens->CreateJoinToken(second).ok());
  REQUIRE(s.join_tokens->CreateJoinToken(MakeToken("t3", "n2", 3, 100)).ok());
  // Made but not used: the node joined with none yet.
  CHECK(absl::IsNotFound(s.join_tokens->FindLastUsedJoinToken("n1").status()));

  REQUIRE(s.join_tokens->RedeemJoinToken("hash-t2", "n1", T(20), MakeNodeKey("k1", "n1")).ok());
  REQUIRE(s.join_tokens->RedeemJoinToken("hash-t1", "n1", T(30), MakeNodeKey("k2", "n1")).ok());
  auto last = s.join_tokens->FindLastUsedJoinToken("n1");
  REQUIRE(last.ok());
  CHECK(last->id() == "t1");  // used last, though made first
  CHECK(last->terms().cluster() == "pool-a");
  REQUIRE(s.join_tokens->RedeemJoinToken("hash-t3", "n2", T(40), MakeNodeKey("k3", "n2")).ok());
  CHECK(s.join_tokens->FindLastUsedJoinToken("n1")->id() == "t1");
  CHECK(s.join_tokens->FindJoinToken("hash-t2")->terms().labels().at("team") == "ml");
}

CONFORMANCE_CASE("API keys: many are looked up by their hashes at once") {
  Stores s = FreshStores();
  for (int i = 0; i < 5; ++i) {
    REQUIRE(
        s.api_keys->CreateKey(MakeNodeKey("k" + std::to_string(i), "n" + std::to_string(i))).ok());
  }
  REQUIRE(s.api_keys->RevokeKey("k2").ok());
  auto found = s.api_keys->FindByHashes(
      {"key-hash-k1", "key-hash-k2", "key-hash-nope", "key-hash-k4", "key-hash-k1"});
  REQUIRE(found.ok());
  std::map<std::string, bool> revoked;
  for (const auto& r : *found) revoked[r.key.id()] = r.key.revoked();
  CHECK(revoked == std::map<std::string, bool>{{"k1", false}, {"k2", true}, {"k4", false}});
  CHECK(found->size() == 3);
  CHECK(s.api_keys->FindByHashes({})->empty());
}

v1::AuditRecord MakeAudit(const std::string& actor, const std::string& action,
                          const std::string& target, int64_t second) {
  v1::AuditRecord r;
  r.set_actor(actor);
  r.set_role(v1::ROLE_OPERATOR);
  r.set_action(action);
  r.set_target(target);
  r.set_source("ipv4:127.0.0.1:5000");
  r.set_outcome("OK");
  r.set_detail("{\"nodeName\":\"n1\"}");
  *r.mutable_time() = ToProtoTime(T(second));
  return r;
}

CONFORMANCE_CASE("audit: appended with increasing ids, read newest first with filters") {
  Stores s = FreshStores();
  std::vector<int64_t> ids;
  for (const auto& r : {MakeAudit("ops", "CordonService/CordonNode", "node n1", 1),
                        MakeAudit("ops", "CordonService/UncordonNode", "node n1", 2),
                        MakeAudit("root", "AdminService/CreateApiKey", "user bob", 3),
                        MakeAudit("ops", "HealthService/InjectFault", "node n2", 4)}) {
    auto id = s.audit->AppendAudit(r);
    REQUIRE(id.ok());
    if (!ids.empty()) CHECK(*id > ids.back());
    ids.push_back(*id);
  }
  auto all = s.audit->ListAudit({});
  REQUIRE(all.ok());
  REQUIRE(all->size() == 4);
  CHECK((*all)[0].action() == "HealthService/InjectFault");
  CHECK((*all)[0].id() == ids[3]);
  CHECK((*all)[3].source() == "ipv4:127.0.0.1:5000");
  CHECK((*all)[3].detail() == "{\"nodeName\":\"n1\"}");

  CHECK(s.audit->ListAudit({.actor = "root"})->size() == 1);
  CHECK(s.audit->ListAudit({.action = "CordonNode"})->size() == 1);
  CHECK(s.audit->ListAudit({.action = "CordonService/UncordonNode"})->size() == 1);
  CHECK(s.audit->ListAudit({.action = "Service/CordonNode"})->empty());
  CHECK(s.audit->ListAudit({.target = "n1"})->size() == 2);
  CHECK(s.audit->ListAudit({.since = T(3)})->size() == 2);
  auto page = s.audit->ListAudit({.limit = 2});
  REQUIRE(page->size() == 2);
  auto next = s.audit->ListAudit({.limit = 2, .before_id = page->back().id()});
  REQUIRE(next->size() == 2);
  CHECK(next->front().id() == ids[1]);
}

}  // namespace admin_conformance
}  // namespace tessera::store::conformance

namespace tessera::store::conformance {
namespace admin_conformance {

SecretRecord Sealed(const std::string& user, const std::string& name, const std::string& sealed) {
  SecretRecord r;
  r.secret.set_user(user);
  r.secret.set_name(name);
  r.secret.set_type(v1::SECRET_TYPE_ENVIRONMENT);
  r.secret.set_env_key("HF_TOKEN");
  r.sealed = sealed;
  return r;
}

CONFORMANCE_CASE("secrets: named within their user, listed by name, deleted once") {
  Stores stores = FreshStores();
  // Bytes of every value, a NUL included: a sealed value is binary.
  const std::string binary("\x00\xff sealed \x01", 11);
  REQUIRE(stores.secrets->CreateSecret(Sealed("alice", "hf", binary)).ok());
  REQUIRE(stores.secrets->CreateSecret(Sealed("alice", "aws", "a")).ok());
  REQUIRE(stores.secrets->CreateSecret(Sealed("bob", "hf", "b")).ok());
  CHECK(stores.secrets->CreateSecret(Sealed("alice", "hf", "again")).code() ==
        absl::StatusCode::kAlreadyExists);
  auto alice = stores.secrets->ListSecrets("alice");
  REQUIRE(alice.ok());
  REQUIRE(alice->size() == 2);
  CHECK((*alice)[0].secret.name() == "aws");
  CHECK((*alice)[1].secret.name() == "hf");
  CHECK((*alice)[1].sealed == binary);
  CHECK((*alice)[1].secret.env_key() == "HF_TOKEN");
  CHECK(stores.secrets->DeleteSecret("alice", "hf").ok());
  CHECK(stores.secrets->DeleteSecret("alice", "hf").code() == absl::StatusCode::kNotFound);
  // Bob's of the same name is untouched.
  auto bob = stores.secrets->ListSecrets("bob");
  REQUIRE(bob.ok());
  REQUIRE(bob->size() == 1);
  CHECK(bob->front().sealed == "b");
  CHECK(stores.secrets->ListSecrets("carol")->empty());
}

}  // namespace admin_conformance
}  // namespace tessera::store::conformance
