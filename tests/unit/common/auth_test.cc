// Who may do what: the role table against the API's every method, API key secrets, expiry and
// revocation (also mid-stream), and key administration (no secret kept anywhere).

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "services/admin/admin_handler.h"
#include "services/common/auth/api_keys.h"
#include "services/common/auth/rpc_roles.h"
#include "services/store/stores.h"
#include "tessera/v1/admin.grpc.pb.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/health.grpc.pb.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/run_metrics.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tessera/v1/shell.grpc.pb.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::auth {
namespace auth_test {

using google::protobuf::DescriptorPool;

// Every RPC of every service the API's .proto files declare (from the build's list of them).
std::set<std::string> ApiMethods() {
  std::set<std::string> out;
  // A file's descriptors are in the pool once its generated code is linked: one type of each.
  for (const auto* linked : {v1::Actor::descriptor(), v1::Run::descriptor(), v1::Node::descriptor(),
                             v1::GetQueueRequest::descriptor(), v1::CordonNodeRequest::descriptor(),
                             v1::StartSweepRequest::descriptor(), v1::LogLine::descriptor(),
                             v1::ApiKey::descriptor(), v1::WorkerMessage::descriptor(),
                             v1::ProgressPoint::descriptor(), v1::ShellInput::descriptor()}) {
    REQUIRE(linked->file() != nullptr);
  }
  for (const auto& file : absl::StrSplit(TESSERA_API_PROTO_FILES, ',')) {
    const auto* fd = DescriptorPool::generated_pool()->FindFileByName(std::string(file));
    INFO(file << ": a new .proto file? add one of its types to the list above");
    REQUIRE(fd != nullptr);
    for (int s = 0; s < fd->service_count(); ++s) {
      const auto* service = fd->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        out.insert(service->full_name() + "/" + service->method(m)->name());
      }
    }
  }
  return out;
}

bool Allows(const std::string& method, v1::Role role) {
  return CheckRpcRole(method, Principal{"someone", role, role == v1::ROLE_NODE ? "n1" : ""}).ok();
}

TEST_CASE("every RPC of the API has exactly one row in the role table, and every row an RPC") {
  const std::set<std::string> methods = ApiMethods();
  REQUIRE(methods.size() > 40);
  std::set<std::string> rows;
  for (const auto& rule : RpcRoleTable()) {
    INFO(rule.method);
    CHECK(rows.insert(std::string(rule.method)).second);  // no method twice
    CHECK(methods.count(std::string(rule.method)) == 1);  // no row for a method that is gone
    // Open without a key (its request carries its own credential), or open to some roles.
    CHECK(rule.open == rule.roles.empty());
  }
  for (const auto& m : methods) {
    INFO(m);
    CHECK(rows.count(m) == 1);
  }
}

TEST_CASE("least privilege: what each role may not call") {
  for (const auto& m : ApiMethods()) {
    INFO(m);
    // A node's key: its control stream, its logs, its certificate, and who it is. Nothing else.
    const bool node_method =
        m == "tessera.v1.WorkerControl/Connect" || m == "tessera.v1.LogService/PushLogs" ||
        absl::StartsWith(m, "tessera.v1.ShellRelay/") ||
        m == "tessera.v1.NodeJoin/RenewNodeCertificate" || m == "tessera.v1.AdminService/WhoAmI";
    CHECK(Allows(m, v1::ROLE_NODE) == node_method);
    // People never call what only Tessera's services may.
    const bool internal =
        m == "tessera.v1.RunService/RecordAttempt" || m == "tessera.v1.RunService/ReportProgress" ||
        m == "tessera.v1.SchedulerService/DispatchToWorker" ||
        m == "tessera.v1.SchedulerService/EvictNode" ||
        m == "tessera.v1.SchedulerService/CheckFit" ||
        absl::StartsWith(m, "tessera.v1.HealthService/Report") ||
        m == "tessera.v1.LogService/PushLogs" || m == "tessera.v1.WorkerControl/Connect" ||
        absl::StartsWith(m, "tessera.v1.ShellRelay/");
    if (internal) {
      for (v1::Role person : {v1::ROLE_USER, v1::ROLE_OPERATOR, v1::ROLE_ADMIN}) {
        CHECK_FALSE(Allows(m, person));
      }
    }
  }
  // Keys, join tokens and the audit log are the admins' alone: a service's key or an operator's
  // cannot mint a credential nor read who did what.
  for (const char* m :
       {"tessera.v1.AdminService/CreateApiKey", "tessera.v1.AdminService/CreateJoinToken",
        "tessera.v1.AdminService/ListJoinTokens", "tessera.v1.AdminService/RevokeJoinToken",
        "tessera.v1.AdminService/ListAuditRecords"}) {
    INFO(m);
    for (v1::Role r : {v1::ROLE_USER, v1::ROLE_OPERATOR, v1::ROLE_SYSTEM, v1::ROLE_NODE}) {
      CHECK_FALSE(Allows(m, r));
    }
    CHECK(Allows(m, v1::ROLE_ADMIN));
  }
  // Join takes no key at all: whatever key a call carries, the table does not let it through
  // (the adapter serves Join itself, checking the token).
  for (v1::Role r :
       {v1::ROLE_USER, v1::ROLE_OPERATOR, v1::ROLE_ADMIN, v1::ROLE_SYSTEM, v1::ROLE_NODE}) {
    CHECK_FALSE(Allows("tessera.v1.NodeJoin/Join", r));
  }
  // Operating nodes: operators and admins, not users.
  for (const char* m :
       {"tessera.v1.CordonService/CordonNode", "tessera.v1.CordonService/DrainNode",
        "tessera.v1.HealthService/StartSweep", "tessera.v1.HealthService/InjectFault",
        "tessera.v1.HealthService/ListSweeps"}) {
    INFO(m);
    CHECK(Allows(m, v1::ROLE_OPERATOR));
    CHECK_FALSE(Allows(m, v1::ROLE_USER));
  }
}

TEST_CASE("what admins and operators do is audited, and their reads of others' runs") {
  const auto audited = [](const char* method, v1::Role role) {
    const RpcRule* rule = FindRpcRule(method);
    REQUIRE(rule != nullptr);
    return Audited(*rule, Principal{"someone", role, role == v1::ROLE_NODE ? "n1" : ""});
  };
  for (const char* m :
       {"tessera.v1.AdminService/CreateApiKey", "tessera.v1.AdminService/RevokeApiKey",
        "tessera.v1.AdminService/CreateJoinToken", "tessera.v1.AdminService/RevokeJoinToken",
        "tessera.v1.CordonService/CordonNode", "tessera.v1.CordonService/UncordonNode",
        "tessera.v1.CordonService/DrainNode", "tessera.v1.SchedulerService/SetNodeLabels",
        "tessera.v1.SchedulerService/RemoveNode", "tessera.v1.HealthService/StartSweep",
        "tessera.v1.HealthService/InjectFault", "tessera.v1.LogService/DeleteRunLogs"}) {
    INFO(m);
    CHECK(audited(m, v1::ROLE_ADMIN));
    CHECK(audited(m, v1::ROLE_OPERATOR));
    CHECK(audited(m, v1::ROLE_USER));          // a user's refused attempt is recorded too
    CHECK_FALSE(audited(m, v1::ROLE_SYSTEM));  // the health API's own cordons are node events
  }
  // Other users' runs: what operators and admins do to them; a user's own runs are not audited.
  for (const char* m : {"tessera.v1.RunService/StopRun", "tessera.v1.RunService/DeleteRun"}) {
    CHECK(audited(m, v1::ROLE_OPERATOR));
    CHECK(audited(m, v1::ROLE_ADMIN));
    CHECK_FALSE(audited(m, v1::ROLE_USER));
  }
  CHECK(audited("tessera.v1.NodeJoin/RenewNodeCertificate", v1::ROLE_NODE));
  // Reading a run (spec, events, logs, metrics, or cloning it): audited when the handler let a
  // person read another user's run, for whatever role; never for the services.
  for (const char* m :
       {"tessera.v1.RunService/GetRun", "tessera.v1.RunService/DescribeRun",
        "tessera.v1.RunService/CloneRun", "tessera.v1.RunMetricsService/GetRunMetrics",
        "tessera.v1.LogService/GetLogs", "tessera.v1.LogService/StreamLogs"}) {
    INFO(m);
    const RpcRule* rule = FindRpcRule(m);
    REQUIRE(rule != nullptr);
    for (v1::Role r : {v1::ROLE_USER, v1::ROLE_OPERATOR, v1::ROLE_ADMIN}) {
      CHECK(Audited(*rule, Principal{"someone", r, ""}, /*read_others_run=*/true));
      CHECK_FALSE(Audited(*rule, Principal{"someone", r, ""}, /*read_others_run=*/false));
    }
    CHECK_FALSE(Audited(*rule, Principal{"svc", v1::ROLE_SYSTEM, ""}, /*read_others_run=*/true));
  }
  for (const char* m : {"tessera.v1.RunService/GetRun", "tessera.v1.AdminService/WhoAmI",
                        "tessera.v1.SchedulerService/GetQueue", "tessera.v1.LogService/PushLogs",
                        "tessera.v1.RunService/ListRuns", "tessera.v1.RunService/WatchRuns"}) {
    for (v1::Role r : {v1::ROLE_USER, v1::ROLE_ADMIN, v1::ROLE_NODE}) CHECK_FALSE(audited(m, r));
  }
}

TEST_CASE("a refusal names the method, the roles that may call it and the caller's role") {
  const auto st =
      CheckRpcRole("tessera.v1.CordonService/CordonNode", Principal{"alice", v1::ROLE_USER, ""});
  REQUIRE(absl::IsPermissionDenied(st));
  CHECK(absl::StrContains(st.message(), "tessera.v1.CordonService/CordonNode"));
  CHECK(absl::StrContains(st.message(), "operator or admin or system"));
  CHECK(absl::StrContains(st.message(), "alice's key is user"));
  // A method with no row is closed to everyone.
  CHECK(absl::IsPermissionDenied(CheckRpcRole("tessera.v1.RunService/NotYetGivenARow",
                                              Principal{"root", v1::ROLE_ADMIN, ""})));
}

TEST_CASE("secrets and ids come from the CSPRNG: 256-bit secrets, never repeated") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string s = NewSecret();
    REQUIRE(s.size() == 4 + 64);
    REQUIRE(s.rfind("tsk_", 0) == 0);
    REQUIRE(seen.insert(s).second);
  }
  CHECK(NewKeyId() != NewKeyId());
  // A retried request makes the same id (the store refuses the second key).
  CHECK(KeyIdForRequest("root", "k1") == KeyIdForRequest("root", "k1"));
  CHECK(KeyIdForRequest("root", "k1") != KeyIdForRequest("root", "k2"));
  CHECK(KeyIdForRequest("root", "k1") != KeyIdForRequest("eve", "k1"));
}

struct KeyFixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  admin::AdminHandler admin{stores.api_keys, stores.join_tokens, stores.audit,
                            std::make_shared<IdempotentCalls>(stores.idempotency, clock), clock};
  Authenticator auth{stores.api_keys, clock, absl::Seconds(5)};
  Principal root{"root", v1::ROLE_ADMIN, ""};

  v1::CreateApiKeyResponse Create(v1::CreateApiKeyRequest req) {
    v1::CreateApiKeyResponse resp;
    const auto st = admin.CreateApiKey(root, req, &resp);
    INFO(st.ToString());
    REQUIRE(st.ok());
    return resp;
  }
};

v1::CreateApiKeyRequest KeyFor(const std::string& user, v1::Role role,
                               const std::string& node = "") {
  v1::CreateApiKeyRequest req;
  req.set_user(user);
  req.set_role(role);
  req.set_node(node);
  return req;
}

TEST_CASE("a node key acts as its node, node keys need a node and nothing else has one") {
  KeyFixture f;
  const auto key = f.Create(KeyFor("node-1", v1::ROLE_NODE, "node-1"));
  auto who = f.auth.Authenticate("Bearer " + key.secret());
  REQUIRE(who.ok());
  CHECK(who->role == v1::ROLE_NODE);
  CHECK(who->node == "node-1");
  v1::CreateApiKeyResponse resp;
  CHECK(absl::IsInvalidArgument(
      f.admin.CreateApiKey(f.root, KeyFor("node-2", v1::ROLE_NODE), &resp)));
  CHECK(absl::IsInvalidArgument(
      f.admin.CreateApiKey(f.root, KeyFor("alice", v1::ROLE_USER, "node-1"), &resp)));
  // System keys are the services' own; no admin hands one out.
  CHECK(absl::IsPermissionDenied(
      f.admin.CreateApiKey(f.root, KeyFor("svc", v1::ROLE_SYSTEM), &resp)));
  // Nor does anyone but an admin make keys.
  CHECK(absl::IsPermissionDenied(f.admin.CreateApiKey(Principal{"svc", v1::ROLE_SYSTEM, ""},
                                                      KeyFor("evil", v1::ROLE_ADMIN), &resp)));
  CHECK(absl::IsPermissionDenied(f.admin.CreateApiKey(Principal{"ops", v1::ROLE_OPERATOR, ""},
                                                      KeyFor("evil", v1::ROLE_ADMIN), &resp)));
}

TEST_CASE("a node key made by hand carries its admin's terms, and no other key has any") {
  KeyFixture f;
  auto req = KeyFor("node-1", v1::ROLE_NODE, "node-1");
  req.mutable_node_terms()->set_cluster("pool-a");
  req.mutable_node_terms()->set_gpu_type("h200");
  req.mutable_node_terms()->set_max_gpus(8);
  const auto key = f.Create(req);
  CHECK(key.key().node_terms().cluster() == "pool-a");
  auto who = f.auth.Authenticate("Bearer " + key.secret());
  REQUIRE(who.ok());
  CHECK(who->node_terms.gpu_type() == "h200");
  CHECK(who->node_terms.max_gpus() == 8);
  auto listed = f.stores.api_keys->ListKeys("node-1");
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].node_terms().cluster() == "pool-a");

  const auto refused = [&](const v1::CreateApiKeyRequest& r, const std::string& what) {
    v1::CreateApiKeyResponse resp;
    const absl::Status st = f.admin.CreateApiKey(f.root, r, &resp);
    INFO(st.ToString());
    return absl::IsInvalidArgument(st) && absl::StrContains(st.message(), what);
  };
  auto user = KeyFor("alice", v1::ROLE_USER);
  user.mutable_node_terms()->set_cluster("pool-a");
  CHECK(refused(user, "node_terms: only a node key has terms"));
  auto too_many = req;
  too_many.mutable_node_terms()->set_max_gpus(65);
  CHECK(refused(too_many, "node_terms.max_gpus"));
  auto bad_label = req;
  (*bad_label.mutable_node_terms()->mutable_labels())[""] = "x";
  CHECK(refused(bad_label, "node_terms.labels"));
}

TEST_CASE("a retried CreateApiKey makes no second key and the secret is kept nowhere") {
  KeyFixture f;
  auto req = KeyFor("alice", v1::ROLE_USER);
  req.set_idempotency_key("retry-me");
  const auto first = f.Create(req);
  v1::CreateApiKeyResponse again;
  const auto st = f.admin.CreateApiKey(f.root, req, &again);
  REQUIRE(absl::IsAlreadyExists(st));
  CHECK(absl::StrContains(st.message(), first.key().id()));
  CHECK(again.secret().empty());
  auto keys = f.stores.api_keys->ListKeys("alice");
  REQUIRE(keys.ok());
  CHECK(keys->size() == 1);
  // The idempotency table has no record of the call (it would hold the secret).
  auto recorded = f.stores.idempotency->Lookup("CreateApiKey/root", "retry-me");
  REQUIRE(recorded.ok());
  CHECK_FALSE(recorded->has_value());
}

TEST_CASE("an expired key stops working at its expiry, a lifetime under a minute is refused") {
  KeyFixture f;
  auto req = KeyFor("ci", v1::ROLE_USER);
  req.set_expires_in_seconds(3600);
  const auto key = f.Create(req);
  REQUIRE(key.key().has_expires_at());
  CHECK(f.auth.Authenticate("Bearer " + key.secret()).ok());
  f.clock->Advance(absl::Minutes(59));
  CHECK(f.auth.Authenticate("Bearer " + key.secret()).ok());
  f.clock->Advance(absl::Minutes(2));
  auto expired = f.auth.Authenticate("Bearer " + key.secret());
  REQUIRE(absl::IsUnauthenticated(expired.status()));
  CHECK(absl::StrContains(expired.status().message(), "expired"));
  req.set_expires_in_seconds(30);
  v1::CreateApiKeyResponse resp;
  CHECK(absl::IsInvalidArgument(f.admin.CreateApiKey(f.root, req, &resp)));
}

TEST_CASE("a user's calls past their rate are refused, others', operators' and services' are not") {
  KeyFixture f;
  CHECK(f.auth.ChargeCall(Principal{"alice", v1::ROLE_USER}).ok());  // no limit until set
  f.auth.set_max_calls_per_user_per_second(5);                       // 50 at once
  const Principal alice{"alice", v1::ROLE_USER};
  for (int i = 0; i < 50; ++i) REQUIRE(f.auth.ChargeCall(alice).ok());
  const absl::Status refused = f.auth.ChargeCall(alice);
  CHECK(absl::IsResourceExhausted(refused));
  CHECK(refused.message() ==
        "user alice called faster than this service allows one user (5 calls a second, 50 at "
        "once: tessera-server --max-calls-per-user-per-second 5); call again in 0.2 s");
  CHECK(f.auth.ChargeCall(Principal{"bob", v1::ROLE_USER}).ok());
  for (const auto& exempt :
       {Principal{"ops", v1::ROLE_OPERATOR}, Principal{"root", v1::ROLE_ADMIN},
        Principal{"tessera-scheduler", v1::ROLE_SYSTEM}, Principal{"node", v1::ROLE_NODE, "n1"}}) {
    for (int i = 0; i < 100; ++i) REQUIRE(f.auth.ChargeCall(exempt).ok());
  }
  f.clock->Advance(absl::Milliseconds(200));  // one more
  CHECK(f.auth.ChargeCall(alice).ok());
  CHECK(absl::IsResourceExhausted(f.auth.ChargeCall(alice)));
  f.auth.set_max_calls_per_user_per_second(0);
  CHECK(f.auth.ChargeCall(alice).ok());
}

TEST_CASE("a key revoked while its stream is open ends the stream, never waiting for the store") {
  KeyFixture f;
  const auto key = f.Create(KeyFor("node-1", v1::ROLE_NODE, "node-1"));
  const std::string header = "Bearer " + key.secret();
  const std::string hash = HashSecret(key.secret());
  REQUIRE(f.auth.Authenticate(header).ok());  // the stream's start
  const absl::Time cached_at = f.clock->Now();
  REQUIRE(f.stores.api_keys->RevokeKey(key.key().id()).ok());
  // Within the cache's lifetime the answer stands, and says how long: the stream asks again then.
  f.clock->Advance(absl::Seconds(1));
  auto holds = f.auth.Revalidate(hash);
  REQUIRE(holds.ok());
  CHECK(*holds == cached_at + absl::Seconds(5));
  // Stale: answered at once from the cache while the store is asked in the background, and
  // good for no time at all (the next message asks again).
  f.clock->Advance(absl::Seconds(5));
  holds = f.auth.Revalidate(hash);
  REQUIRE(holds.ok());
  CHECK(*holds == f.clock->Now());
  absl::Status later;
  for (int i = 0; i < 500; ++i) {
    later = f.auth.Revalidate(hash).status();
    if (!later.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(absl::IsUnauthenticated(later));
  CHECK(absl::StrContains(later.message(), "revoked"));
}

TEST_CASE("a flood of made-up keys never evicts the keys in use from the cache") {
  KeyFixture f;
  const auto key = f.Create(KeyFor("alice", v1::ROLE_USER));
  const std::string header = "Bearer " + key.secret();
  REQUIRE(f.auth.Authenticate(header).ok());
  // Revoked in the store: only a fresh lookup would see it, so an answer that stays good below
  // is one the cache kept.
  REQUIRE(f.stores.api_keys->RevokeKey(key.key().id()).ok());
  int refused = 0;
  for (int i = 0; i < 120'000; ++i) {
    refused += f.auth.Authenticate(absl::StrCat("Bearer tsk_made_up_", i)).ok() ? 0 : 1;
  }
  CHECK(refused == 120'000);
  CHECK(f.auth.Authenticate(header).ok());
  f.clock->Advance(absl::Seconds(6));  // the cached answer ran out: the store says revoked
  CHECK(absl::IsUnauthenticated(f.auth.Authenticate(header).status()));
}

TEST_CASE("an expired key ends a stream at its next message") {
  KeyFixture f;
  auto req = KeyFor("node-1", v1::ROLE_NODE, "node-1");
  req.set_expires_in_seconds(60);
  const auto key = f.Create(req);
  const std::string header = "Bearer " + key.secret();
  const std::string hash = HashSecret(key.secret());
  REQUIRE(f.auth.Authenticate(header).ok());
  CHECK(f.auth.Revalidate(hash).ok());
  // Two seconds before its expiry the answer holds until the expiry, not the cache's end.
  f.clock->Advance(absl::Seconds(58));
  REQUIRE(f.auth.Authenticate(header).ok());  // cached afresh
  auto holds = f.auth.Revalidate(hash);
  REQUIRE(holds.ok());
  CHECK(*holds == f.clock->Now() + absl::Seconds(2));
  f.clock->Advance(absl::Seconds(2));
  CHECK(absl::IsUnauthenticated(f.auth.Revalidate(hash).status()));
}

// Counts the key store's reads, to show that stale keys are re-read together.
class CountingKeyStore final : public store::ApiKeyStore {
 public:
  explicit CountingKeyStore(std::shared_ptr<store::ApiKeyStore> inner) : inner_(std::move(inner)) {}
  absl::Status CreateKey(const store::ApiKeyRecord& r) override { return inner_->CreateKey(r); }
  absl::StatusOr<store::ApiKeyRecord> FindByHash(std::string_view h) override {
    ++single_reads;
    return inner_->FindByHash(h);
  }
  absl::StatusOr<std::vector<store::ApiKeyRecord>> FindByHashes(
      const std::vector<std::string>& hashes) override {
    ++batch_reads;
    return inner_->FindByHashes(hashes);
  }
  absl::StatusOr<std::vector<v1::ApiKey>> ListKeys(std::string_view user) override {
    return inner_->ListKeys(user);
  }
  absl::Status RevokeKey(std::string_view id) override { return inner_->RevokeKey(id); }
  std::atomic<int> single_reads{0}, batch_reads{0};

 private:
  std::shared_ptr<store::ApiKeyStore> inner_;
};

TEST_CASE("the stale keys of many open streams are re-read together, revocations included") {
  KeyFixture f;
  auto counting = std::make_shared<CountingKeyStore>(f.stores.api_keys);
  Authenticator auth{counting, f.clock, absl::Seconds(5)};
  std::vector<v1::CreateApiKeyResponse> keys;
  for (int i = 0; i < 200; ++i) {
    const std::string node = "node-" + std::to_string(i);
    keys.push_back(f.Create(KeyFor(node, v1::ROLE_NODE, node)));
    REQUIRE(auth.Authenticate("Bearer " + keys.back().secret()).ok());
  }
  CHECK(counting->single_reads == 200);  // each stream's start
  for (int i : {3, 77, 150}) REQUIRE(f.stores.api_keys->RevokeKey(keys[i].key().id()).ok());
  f.clock->Advance(absl::Seconds(6));
  for (const auto& k : keys) CHECK(auth.Revalidate(HashSecret(k.secret())).ok());  // stale
  // Answered from the refreshed cache: the three revoked keys end their streams.
  std::set<int> refused;
  for (int round = 0; round < 500 && refused.size() < 3; ++round) {
    for (int i = 0; i < 200; ++i) {
      if (!auth.Revalidate(HashSecret(keys[i].secret())).ok()) refused.insert(i);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(refused == std::set<int>{3, 77, 150});
  CHECK(counting->single_reads == 200);
  CHECK(counting->batch_reads >= 1);
  CHECK(counting->batch_reads <= 10);  // 200 keys in a few statements, not 200
}

}  // namespace auth_test
}  // namespace tessera::auth
