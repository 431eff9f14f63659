// Joining: a one-time token, made by an admin for one node and expiring, gets a worker its node
// key and a certificate signed by the cluster CA for a key pair the worker made. Memory stores, a
// real CA (deploy/tls-certs.sh), a fake clock.
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "services/admin/admin_handler.h"
#include "services/admin/join_handler.h"
#include "services/common/auth/api_keys.h"
#include "services/store/stores.h"
#include "tests/support/test_pki.h"

namespace tessera::admin {
namespace join_test {

struct Fixture {
  explicit Fixture(bool with_ca = true) {
    if (with_ca) {
      auto loaded = tls::CertificateAuthority::Load(pki.ca(), pki.ca_key());
      REQUIRE(loaded.ok());
      ca = *loaded;
    }
    join = std::make_unique<JoinHandler>(stores.join_tokens, ca, clock,
                                         JoinOptions{.certificate_validity = absl::Hours(48)});
  }

  // A token's secret for `node`, made by an admin.
  std::string Token(const std::string& node, int64_t seconds = 0, std::string* id = nullptr) {
    v1::CreateJoinTokenRequest req;
    req.set_node(node);
    req.set_expires_in_seconds(seconds);
    v1::CreateJoinTokenResponse resp;
    REQUIRE(admin.CreateJoinToken(root, req, &resp).ok());
    if (id != nullptr) *id = resp.token().id();
    return resp.secret();
  }
  static v1::JoinRequest Request(const std::string& token, const std::string& node) {
    auto pair = tls::MakeKeyAndCsr("node:" + node);
    REQUIRE(pair.ok());
    v1::JoinRequest req;
    req.set_token(token);
    req.set_node(node);
    req.set_csr_pem(pair->csr_pem);
    return req;
  }

  testing::TestPki pki;
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>(absl::Now());
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<const tls::CertificateAuthority> ca;
  AdminHandler admin{stores.api_keys, stores.join_tokens, stores.audit,
                     std::make_shared<IdempotentCalls>(stores.idempotency, clock), clock};
  std::unique_ptr<JoinHandler> join;
  auth::Principal root{"root", v1::ROLE_ADMIN, ""};
  auth::Authenticator auth{stores.api_keys, clock, absl::ZeroDuration()};
};

TEST_CASE("a join token gets its node a node key and a certificate, once") {
  Fixture f;
  const std::string token = f.Token("gpu-1");
  CHECK(absl::StartsWith(token, "tjt_"));
  v1::JoinResponse resp;
  REQUIRE(f.join->Join(Fixture::Request(token, "gpu-1"), &resp).ok());
  auto who = f.auth.Authenticate("Bearer " + resp.api_key());
  REQUIRE(who.ok());
  CHECK(who->role == v1::ROLE_NODE);
  CHECK(who->node == "gpu-1");
  auto info = tls::ReadCertificateInfo(resp.certificate_pem());
  REQUIRE(info.ok());
  CHECK(info->common_name == "node:gpu-1");
  CHECK(resp.ca_pem() == f.ca->ca_pem());

  v1::JoinResponse again;
  const auto st = f.join->Join(Fixture::Request(token, "gpu-1"), &again);
  REQUIRE(absl::IsPermissionDenied(st));
  CHECK(absl::StrContains(st.message(), "already used"));
  CHECK(again.api_key().empty());

  // The token's record says what it made; the secret is not kept.
  auto tokens = f.stores.join_tokens->ListJoinTokens();
  REQUIRE(tokens.ok());
  REQUIRE(tokens->size() == 1);
  CHECK((*tokens)[0].key_id() == resp.key_id());
  CHECK((*tokens)[0].has_used_at());
}

TEST_CASE("a join token is refused for another node, after it expires, once revoked") {
  Fixture f;
  v1::JoinResponse resp;
  auto st = f.join->Join(Fixture::Request(f.Token("gpu-1"), "gpu-2"), &resp);
  REQUIRE(absl::IsPermissionDenied(st));
  CHECK(absl::StrContains(st.message(), "is for node \"gpu-1\""));

  const std::string soon = f.Token("gpu-3", 120);
  f.clock->Advance(absl::Seconds(121));
  st = f.join->Join(Fixture::Request(soon, "gpu-3"), &resp);
  REQUIRE(absl::IsPermissionDenied(st));
  CHECK(absl::StrContains(st.message(), "expired"));

  std::string id;
  const std::string revoked = f.Token("gpu-4", 0, &id);
  v1::RevokeJoinTokenRequest revoke;
  revoke.set_id(id);
  v1::RevokeJoinTokenResponse r;
  REQUIRE(f.admin.RevokeJoinToken(f.root, revoke, &r).ok());
  st = f.join->Join(Fixture::Request(revoked, "gpu-4"), &resp);
  REQUIRE(absl::IsPermissionDenied(st));
  CHECK(absl::StrContains(st.message(), "revoked"));

  CHECK(absl::IsUnauthenticated(
      f.join->Join(Fixture::Request("tjt_" + std::string(64, '0'), "gpu-5"), &resp)));
  CHECK(absl::IsUnauthenticated(f.join->Join(Fixture::Request("tsk_abc", "gpu-5"), &resp)));
  CHECK(absl::IsInvalidArgument(f.join->Join(Fixture::Request(soon, "Bad Name"), &resp)));
  // Nothing was made by any of these.
  CHECK(f.stores.api_keys->ListKeys("")->empty());
}

TEST_CASE("without a usable token nothing is done for the caller: the CA signs nothing") {
  Fixture f;
  // A certificate request the CA would refuse: a call that reached signing would say so.
  v1::JoinRequest unknown = Fixture::Request("tjt_" + std::string(64, '1'), "gpu-1");
  unknown.set_csr_pem("not a request");
  v1::JoinResponse resp;
  CHECK(absl::IsUnauthenticated(f.join->Join(unknown, &resp)));
  v1::JoinRequest other = Fixture::Request(f.Token("gpu-2"), "gpu-1");
  other.set_csr_pem("not a request");
  const absl::Status st = f.join->Join(other, &resp);
  CHECK(absl::IsPermissionDenied(st));
  CHECK(absl::StrContains(st.message(), "is for node \"gpu-2\""));
}

TEST_CASE("a bad request does not spend the token") {
  Fixture f;
  const std::string token = f.Token("gpu-1");
  v1::JoinRequest bad = Fixture::Request(token, "gpu-1");
  bad.set_csr_pem("not a request");
  v1::JoinResponse resp;
  CHECK(absl::IsInvalidArgument(f.join->Join(bad, &resp)));
  CHECK(f.join->Join(Fixture::Request(token, "gpu-1"), &resp).ok());
}

TEST_CASE("joining again replaces the node's credential: the old key stops working") {
  Fixture f;
  v1::JoinResponse first, second;
  REQUIRE(f.join->Join(Fixture::Request(f.Token("gpu-1"), "gpu-1"), &first).ok());
  REQUIRE(f.join->Join(Fixture::Request(f.Token("gpu-1"), "gpu-1"), &second).ok());
  CHECK_FALSE(f.auth.Authenticate("Bearer " + first.api_key()).ok());
  CHECK(f.auth.Authenticate("Bearer " + second.api_key()).ok());
}

TEST_CASE("a node renews its own certificate with its key, nobody else does") {
  Fixture f;
  auto pair = tls::MakeKeyAndCsr("node:gpu-1");
  REQUIRE(pair.ok());
  v1::RenewNodeCertificateRequest req;
  req.set_csr_pem(pair->csr_pem);
  v1::RenewNodeCertificateResponse resp;
  REQUIRE(f.join->RenewNodeCertificate(auth::Principal{"gpu-1", v1::ROLE_NODE, "gpu-1"}, req, &resp)
              .ok());
  CHECK(tls::ReadCertificateInfo(resp.certificate_pem())->common_name == "node:gpu-1");
  CHECK(absl::IsPermissionDenied(
      f.join->RenewNodeCertificate(auth::Principal{"root", v1::ROLE_ADMIN, ""}, req, &resp)));
}

TEST_CASE("without the CA's key, a node gets its key only") {
  Fixture f(/*with_ca=*/false);
  v1::JoinResponse resp;
  REQUIRE(f.join->Join(Fixture::Request(f.Token("gpu-1"), "gpu-1"), &resp).ok());
  CHECK_FALSE(resp.api_key().empty());
  CHECK(resp.certificate_pem().empty());
  v1::RenewNodeCertificateRequest req;
  v1::RenewNodeCertificateResponse renewed;
  CHECK(absl::IsFailedPrecondition(f.join->RenewNodeCertificate(
      auth::Principal{"gpu-1", v1::ROLE_NODE, "gpu-1"}, req, &renewed)));
}

TEST_CASE("join tokens: admins only, a lifetime from a minute to a week") {
  Fixture f;
  v1::CreateJoinTokenRequest req;
  req.set_node("gpu-1");
  v1::CreateJoinTokenResponse resp;
  CHECK(absl::IsPermissionDenied(
      f.admin.CreateJoinToken(auth::Principal{"ops", v1::ROLE_OPERATOR, ""}, req, &resp)));
  req.set_expires_in_seconds(30);
  CHECK(absl::IsInvalidArgument(f.admin.CreateJoinToken(f.root, req, &resp)));
  req.set_expires_in_seconds(8 * 86400);
  CHECK(absl::IsInvalidArgument(f.admin.CreateJoinToken(f.root, req, &resp)));
  req.set_expires_in_seconds(0);
  req.set_idempotency_key("once");
  REQUIRE(f.admin.CreateJoinToken(f.root, req, &resp).ok());
  v1::CreateJoinTokenResponse retry;
  const auto st = f.admin.CreateJoinToken(f.root, req, &retry);
  REQUIRE(absl::IsAlreadyExists(st));
  CHECK(absl::StrContains(st.message(), resp.token().id()));
  CHECK(retry.secret().empty());
}

TEST_CASE("a join token keeps the node's terms its admin set, checked when it is made") {
  Fixture f;
  v1::CreateJoinTokenRequest req;
  req.set_node("gpu-1");
  v1::NodeTerms& terms = *req.mutable_terms();
  terms.set_cluster("pool-a");
  terms.set_gpu_type("h200");
  terms.set_max_gpus(8);
  (*terms.mutable_labels())["team"] = "ml";
  v1::CreateJoinTokenResponse resp;
  REQUIRE(f.admin.CreateJoinToken(f.root, req, &resp).ok());
  CHECK(resp.token().terms().cluster() == "pool-a");
  auto listed = f.stores.join_tokens->ListJoinTokens();
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].terms().max_gpus() == 8);
  CHECK((*listed)[0].terms().labels().at("team") == "ml");

  const auto refused = [&](const std::string& field) {
    v1::CreateJoinTokenResponse r;
    const absl::Status st = f.admin.CreateJoinToken(f.root, req, &r);
    INFO(st.ToString());
    return absl::IsInvalidArgument(st) && absl::StrContains(st.message(), field);
  };
  terms.set_max_gpus(65);
  CHECK(refused("terms.max_gpus"));
  terms.set_max_gpus(8);
  terms.set_cluster(std::string(64, 'c'));
  CHECK(refused("terms.cluster"));
  terms.set_cluster("pool-a");
  (*terms.mutable_labels())[""] = "x";
  CHECK(refused("terms.labels"));
}

TEST_CASE("the node key a join makes carries its token's terms to whoever checks the key") {
  Fixture f;
  v1::CreateJoinTokenRequest req;
  req.set_node("gpu-1");
  req.mutable_terms()->set_cluster("pool-a");
  req.mutable_terms()->set_gpu_type("h200");
  (*req.mutable_terms()->mutable_labels())["team"] = "ml";
  v1::CreateJoinTokenResponse token;
  REQUIRE(f.admin.CreateJoinToken(f.root, req, &token).ok());
  v1::JoinResponse joined;
  REQUIRE(f.join->Join(Fixture::Request(token.secret(), "gpu-1"), &joined).ok());
  auto who = f.auth.Authenticate("Bearer " + joined.api_key());
  REQUIRE(who.ok());
  CHECK(who->node_terms.cluster() == "pool-a");
  CHECK(who->node_terms.gpu_type() == "h200");
  CHECK(who->node_terms.labels().at("team") == "ml");
  // A token without terms makes a key without terms.
  v1::JoinResponse open;
  REQUIRE(f.join->Join(Fixture::Request(f.Token("gpu-2"), "gpu-2"), &open).ok());
  auto open_who = f.auth.Authenticate("Bearer " + open.api_key());
  REQUIRE(open_who.ok());
  CHECK(open_who->node_terms.ByteSizeLong() == 0);
}

}  // namespace join_test
}  // namespace tessera::admin
