// The audit log: every audited call (the role table's marks) is recorded by Serve with its actor,
// target, source and outcome, refused attempts included; calls people only read are not.
// Through the real AdminService adapter on a gRPC server in this process, over memory stores.
#include "services/common/auth/audit_log.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "base/clock.h"
#include "services/admin/admin_handler.h"
#include "services/admin/admin_service.h"
#include "services/common/auth/api_keys.h"
#include "services/store/stores.h"
#include "transport/client_address.h"

namespace tessera::auth {
namespace {

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

}  // namespace
}  // namespace tessera::auth
