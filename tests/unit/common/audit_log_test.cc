// The audit log: every audited call (the role table's marks) is recorded by Serve with its actor,
// target, source and outcome, refused attempts included; calls people only read are not.
// Through the real AdminService adapter on a gRPC server in this process, over memory stores.
#include "services/common/auth/audit_log.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "base/clock.h"
#include "base/timestamps.h"
#include "services/admin/admin_handler.h"
#include "services/admin/admin_service.h"
#include "services/common/auth/api_keys.h"
#include "services/common/auth/refusal_tally.h"
#include "services/store/stores.h"
#include "transport/client_address.h"

namespace tessera::auth {
namespace audit_log_test {

struct Fixture {
  Fixture() {
    for (const auto& [user, role, secret] :
         {std::tuple{"root", v1::ROLE_ADMIN, &admin_key}, {"bob", v1::ROLE_USER, &user_key}}) {
      store::ApiKeyRecord r;
      *secret = NewSecret();
      r.secret_hash = HashSecret(*secret);
      r.key.set_id(std::string("key-") + user);
      r.key.set_user(user);
      r.key.set_role(role);
      REQUIRE(stores.api_keys->CreateKey(r).ok());
    }
    grpc::ServerBuilder builder;
    builder.RegisterService(&service);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    server = builder.BuildAndStart();
    REQUIRE(server != nullptr);
    in_process = v1::AdminService::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
    network = v1::AdminService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                            grpc::InsecureChannelCredentials()));
  }
  ~Fixture() { server->Shutdown(); }

  static std::unique_ptr<grpc::ClientContext> As(const std::string& key,
                                                 const std::string& client = "") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", "Bearer " + key);
    if (!client.empty()) ctx->AddMetadata(kClientAddressMetadata, client);
    return ctx;
  }
  std::vector<v1::AuditRecord> Records() {
    auto records = stores.audit->ListAudit({});
    REQUIRE(records.ok());
    return *records;
  }

  std::shared_ptr<FakeClock> clock =
      std::make_shared<FakeClock>(absl::FromUnixSeconds(1'750'000'000));
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<Authenticator> auth = std::make_shared<Authenticator>(
      stores.api_keys, clock, absl::Seconds(5), std::make_shared<AuditLog>(stores.audit, clock));
  admin::AdminService service{
      std::make_shared<admin::AdminHandler>(
          stores.api_keys, stores.join_tokens, stores.audit,
          std::make_shared<IdempotentCalls>(stores.idempotency, clock), clock),
      auth};
  std::string admin_key, user_key;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::AdminService::Stub> in_process, network;
};

TEST_CASE("an admin's action is recorded with its actor, target, source and outcome") {
  Fixture f;
  v1::CreateApiKeyRequest req;
  req.set_idempotency_key("k-1");
  req.set_user("carol");
  req.set_role(v1::ROLE_OPERATOR);
  v1::CreateApiKeyResponse resp;
  REQUIRE(f.network->CreateApiKey(Fixture::As(f.admin_key).get(), req, &resp).ok());
  const auto records = f.Records();
  REQUIRE(records.size() == 1);
  const v1::AuditRecord& r = records[0];
  CHECK(r.actor() == "root");
  CHECK(r.role() == v1::ROLE_ADMIN);
  CHECK(r.key_id() == "key-root");
  CHECK(r.action() == "AdminService/CreateApiKey");
  CHECK(r.target() == "user carol");
  CHECK(r.outcome() == "OK");
  CHECK(absl::StartsWith(r.source(), "ipv4:127.0.0.1:"));
  CHECK(absl::FromUnixSeconds(r.time().seconds()) == f.clock->Now());
  // The request's fields, without its idempotency key; the secret was in the response only.
  CHECK(absl::StrContains(r.detail(), "\"user\":\"carol\""));
  CHECK(absl::StrContains(r.detail(), "ROLE_OPERATOR"));
  CHECK_FALSE(absl::StrContains(r.detail(), "k-1"));
  CHECK_FALSE(absl::StrContains(r.detail(), resp.secret()));
}

TEST_CASE("a refused attempt is recorded, reading is not") {
  Fixture f;
  v1::CreateJoinTokenRequest token;
  token.set_node("node-9");
  v1::CreateJoinTokenResponse resp;
  const grpc::Status st = f.network->CreateJoinToken(Fixture::As(f.user_key).get(), token, &resp);
  CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  v1::WhoAmIResponse who;
  REQUIRE(f.network->WhoAmI(Fixture::As(f.user_key).get(), v1::WhoAmIRequest(), &who).ok());
  v1::ListApiKeysResponse keys;
  REQUIRE(
      f.network->ListApiKeys(Fixture::As(f.admin_key).get(), v1::ListApiKeysRequest(), &keys).ok());
  const auto records = f.Records();
  REQUIRE(records.size() == 1);
  CHECK(records[0].actor() == "bob");
  CHECK(records[0].action() == "AdminService/CreateJoinToken");
  CHECK(records[0].target() == "node node-9");
  CHECK(absl::StartsWith(records[0].outcome(), "PERMISSION_DENIED: "));
  // An unauthenticated call names no one: it is not recorded.
  CHECK(f.network->CreateJoinToken(Fixture::As("tsk_nobody").get(), token, &resp).error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);
  CHECK(f.Records().size() == 1);
}

// bob, a user, asks for a join token for `node`: refused.
void RefuseJoinToken(Fixture& f, const std::string& node) {
  v1::CreateJoinTokenRequest token;
  token.set_node(node);
  v1::CreateJoinTokenResponse resp;
  CHECK(f.network->CreateJoinToken(Fixture::As(f.user_key).get(), token, &resp).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
}

TEST_CASE("one caller's repeated refusals are recorded once a window, and counted") {
  Fixture f;
  for (int i = 0; i < 50; ++i) RefuseJoinToken(f, "node-" + std::to_string(i));
  // Another kind (an admin's refusal, another method) has a window of its own.
  v1::RevokeApiKeyRequest revoke;
  revoke.set_id("key-none");
  v1::RevokeApiKeyResponse revoked;
  CHECK(f.network->RevokeApiKey(Fixture::As(f.admin_key).get(), revoke, &revoked).error_code() ==
        grpc::StatusCode::NOT_FOUND);
  auto records = f.Records();
  REQUIRE(records.size() == 2);                 // newest first
  CHECK(records[1].target() == "node node-0");  // the first, in full
  CHECK(records[0].actor() == "root");

  // A window later the count is written, with who, what and how, and none of the requests.
  const absl::Time first = f.clock->Now();
  f.clock->Advance(absl::Seconds(1));
  f.auth->audit_log()->Flush();
  records = f.Records();
  REQUIRE(records.size() == 3);
  const v1::AuditRecord& folded = records[0];
  CHECK(folded.actor() == "bob");
  CHECK(folded.key_id() == "key-bob");
  CHECK(folded.action() == "AdminService/CreateJoinToken");
  CHECK(folded.target().empty());
  CHECK(folded.detail().empty());
  CHECK(absl::StartsWith(folded.outcome(), "PERMISSION_DENIED: 49 more refusals like the one"));
  CHECK(absl::StrContains(folded.outcome(), "counted, not recorded one by one"));
  CHECK(FromProtoTime(folded.time()) == first);
  f.auth->audit_log()->Flush();  // written once
  CHECK(f.Records().size() == 3);

  // The next window starts with a refusal in full; what is counted in it is written when the
  // next one after the window comes.
  RefuseJoinToken(f, "node-later");
  RefuseJoinToken(f, "node-later-2");
  f.clock->Advance(absl::Seconds(2));
  RefuseJoinToken(f, "node-last");
  records = f.Records();
  REQUIRE(records.size() == 6);
  CHECK(records[0].target() == "node node-last");
  CHECK(absl::StartsWith(records[1].outcome(), "PERMISSION_DENIED: 1 more refusal like"));
  CHECK(records[2].target() == "node node-later");
}

TEST_CASE("refusals still counted are written when the audit log closes") {
  auto f = std::make_unique<Fixture>();
  const auto audit = f->stores.audit;
  for (int i = 0; i < 3; ++i) RefuseJoinToken(*f, "node-" + std::to_string(i));
  REQUIRE(f->Records().size() == 1);
  f.reset();  // the server, the service and the audit log with them
  const auto records = audit->ListAudit({});
  REQUIRE(records.ok());
  REQUIRE(records->size() == 2);
  CHECK(absl::StartsWith((*records)[0].outcome(), "PERMISSION_DENIED: 2 more refusals like"));
}

TEST_CASE("a refusal tally: one record a window and kind, counts taken once") {
  const absl::Time t0 = absl::FromUnixSeconds(1'750'000'000);
  RefusalTally tally(absl::Seconds(1));
  std::vector<RefusalTally::Folded> due;
  int made = 0;
  auto make = [&] {
    ++made;
    v1::AuditRecord r;
    r.set_outcome("RESOURCE_EXHAUSTED: too fast");
    return r;
  };
  CHECK(tally.Admit("bob", t0, make, &due).has_value());
  CHECK_FALSE(tally.Admit("bob", t0 + absl::Milliseconds(500), make, &due).has_value());
  CHECK_FALSE(tally.Admit("bob", t0 + absl::Milliseconds(999), make, &due).has_value());
  CHECK(tally.Admit("eve", t0 + absl::Milliseconds(999), make, &due).has_value());
  CHECK(made == 2);  // a counted refusal costs no record
  CHECK(due.empty());
  CHECK(tally.TakeDue(t0 + absl::Milliseconds(999)).empty());  // bob's window is not over
  const auto taken = tally.TakeDue(t0 + absl::Seconds(1));
  REQUIRE(taken.size() == 1);
  CHECK(taken[0].count == 2);
  CHECK(taken[0].since == t0 + absl::Milliseconds(500));
  CHECK(taken[0].until == t0 + absl::Milliseconds(999));
  CHECK(tally.TakeDue(absl::InfiniteFuture()).empty());  // eve's window held nothing counted
  // bob was forgotten: his next refusal starts a window, with nothing due.
  CHECK(tally.Admit("bob", t0 + absl::Seconds(5), make, &due).has_value());
  CHECK(due.empty());
  // A window of zero writes every refusal.
  RefusalTally every(absl::ZeroDuration());
  for (int i = 0; i < 3; ++i) CHECK(every.Admit("bob", t0, make, &due).has_value());
}

TEST_CASE("the REST client's address is believed only from the gateway") {
  Fixture f;
  v1::RevokeApiKeyRequest req;
  req.set_id("key-gone");
  v1::RevokeApiKeyResponse resp;
  // The gateway of tessera-server reaches the services in process.
  REQUIRE(f.in_process->RevokeApiKey(Fixture::As(f.admin_key, "10.1.2.3:5555").get(), req, &resp)
              .error_code() == grpc::StatusCode::NOT_FOUND);
  // Anyone else on the network could claim any address: the peer's own is recorded.
  req.set_id("key-root");
  CHECK(f.network->RevokeApiKey(Fixture::As(f.user_key, "10.9.9.9:1").get(), req, &resp)
            .error_code() == grpc::StatusCode::NOT_FOUND);
  const auto records = f.Records();
  REQUIRE(records.size() == 2);
  CHECK(records[1].source() == "10.1.2.3:5555 via the REST gateway (in-process)");
  CHECK(records[1].target() == "id key-gone");
  CHECK_FALSE(absl::StrContains(records[0].source(), "10.9.9.9"));
  CHECK(absl::StartsWith(records[0].source(), "ipv4:127.0.0.1:"));
  CHECK(absl::StartsWith(records[0].outcome(), "NOT_FOUND"));
}

TEST_CASE("the audit log is read newest first, filtered, by admins only") {
  Fixture f;
  for (int i = 0; i < 3; ++i) {
    v1::CreateJoinTokenRequest token;
    token.set_node("node-" + std::to_string(i));
    v1::CreateJoinTokenResponse resp;
    REQUIRE(f.network->CreateJoinToken(Fixture::As(f.admin_key).get(), token, &resp).ok());
    f.clock->Advance(absl::Minutes(1));
  }
  v1::ListAuditRecordsRequest req;
  req.set_target("node-1");
  v1::ListAuditRecordsResponse resp;
  REQUIRE(f.network->ListAuditRecords(Fixture::As(f.admin_key).get(), req, &resp).ok());
  REQUIRE(resp.records_size() == 1);
  CHECK(resp.records(0).target() == "node node-1");
  req.Clear();
  req.set_action("CreateJoinToken");
  req.set_limit(2);
  REQUIRE(f.network->ListAuditRecords(Fixture::As(f.admin_key).get(), req, &resp).ok());
  REQUIRE(resp.records_size() == 2);
  CHECK(resp.records(0).target() == "node node-2");
  CHECK(f.network->ListAuditRecords(Fixture::As(f.user_key).get(), req, &resp).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  req.set_limit(5000);
  CHECK(f.network->ListAuditRecords(Fixture::As(f.admin_key).get(), req, &resp).error_code() ==
        grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("a target names every field that says what a request acts on") {
  v1::CreateApiKeyRequest key;
  key.set_user("dave");
  key.set_node("n7");
  key.set_role(v1::ROLE_NODE);
  CHECK(AuditLog::TargetOf(key) == "node n7, user dave");
  v1::RevokeJoinTokenRequest token;
  token.set_id("jt-1");
  CHECK(AuditLog::TargetOf(token) == "id jt-1");
  CHECK(AuditLog::TargetOf(v1::WhoAmIRequest()).empty());
}

}  // namespace audit_log_test
}  // namespace tessera::auth
