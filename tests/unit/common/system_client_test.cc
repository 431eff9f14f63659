// One service calling another: SystemClient sends the system key and a deadline over a channel
// that may be set late; an adapter written with TESSERA_UNARY_RPC authenticates the key and
// forwards to its handler.
#include "services/common/system_client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "services/common/auth/api_keys.h"
#include "services/common/auth/unknown_key_limiter.h"
#include "services/common/rpc.h"
#include "services/common/standby.h"
#include "services/store/stores.h"
#include "tessera/v1/admin.grpc.pb.h"

namespace tessera {
namespace system_client_test {

constexpr char kSystemSecret[] = "tsk_system0000000000000000000000000000000000";
constexpr char kUserSecret[] = "tsk_user000000000000000000000000000000000000";

// A handler with the adapters' shape: (who, request, response).
class Handler {
 public:
  absl::Status WhoAmI(const auth::Principal& who, const v1::WhoAmIRequest&,
                      v1::WhoAmIResponse* resp) {
    ++calls;
    traffic = store::current_traffic_class;
    if (standby) return StandbyError("test", "ask the leader");
    if (!own_failure.ok()) return own_failure;
    resp->set_user(who.user);
    resp->set_role(who.role);
    return absl::OkStatus();
  }
  absl::Status RevokeApiKey(const auth::Principal&, const v1::RevokeApiKeyRequest& req,
                            v1::RevokeApiKeyResponse*) {
    return absl::NotFoundError("API key " + req.id() + " not found");
  }
  std::atomic<int> calls{0};
  std::atomic<store::TrafficClass> traffic{store::TrafficClass::kControl};
  std::atomic<bool> standby{false};
  absl::Status own_failure;  // what a leader answers (set before calls)
};

// An adapter as the services write them; ListApiKeys records what the call carried.
class Adapter final : public v1::AdminService::Service {
 public:
  using Api = v1::AdminService;

  Adapter(std::shared_ptr<Handler> handler, std::shared_ptr<auth::Authenticator> auth)
      : handler_(std::move(handler)), auth_(std::move(auth)) {}

  TESSERA_UNARY_RPC(handler_, WhoAmI)
  TESSERA_UNARY_RPC(handler_, RevokeApiKey)

  grpc::Status ListApiKeys(grpc::ServerContext* ctx, const v1::ListApiKeysRequest*,
                           v1::ListApiKeysResponse*) override {
    absl::MutexLock lock(&mu_);
    auto it = ctx->client_metadata().find("authorization");
    authorization_ =
        it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
    deadline_ = ctx->deadline();
    return grpc::Status::OK;
  }
  std::string authorization() {
    absl::MutexLock lock(&mu_);
    return authorization_;
  }
  std::chrono::system_clock::time_point deadline() {
    absl::MutexLock lock(&mu_);
    return deadline_;
  }

 private:
  std::shared_ptr<Handler> handler_;
  std::shared_ptr<auth::Authenticator> auth_;
  absl::Mutex mu_;
  std::string authorization_ ABSL_GUARDED_BY(mu_);
  std::chrono::system_clock::time_point deadline_ ABSL_GUARDED_BY(mu_);
};

struct Fixture {
  Fixture() {
    AddKey("key-system", "tessera-runs", v1::ROLE_SYSTEM, kSystemSecret);
    AddKey("key-user", "alice", v1::ROLE_USER, kUserSecret);
    grpc::ServerBuilder builder;
    builder.RegisterService(&adapter);
    server = builder.BuildAndStart();
    REQUIRE(server);
  }
  ~Fixture() { server->Shutdown(); }
  std::shared_ptr<grpc::Channel> Channel() {
    return server->InProcessChannel(grpc::ChannelArguments());
  }

  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<Handler> handler = std::make_shared<Handler>();
  Adapter adapter{handler, std::make_shared<auth::Authenticator>(stores.api_keys,
                                                                 std::make_shared<FakeClock>())};
  std::unique_ptr<grpc::Server> server;

  void AddKey(const char* id, const char* user, v1::Role role, const char* secret) {
    store::ApiKeyRecord record;
    record.key.set_id(id);
    record.key.set_user(user);
    record.key.set_role(role);
    record.secret_hash = auth::HashSecret(secret);
    REQUIRE(stores.api_keys->CreateKey(record).ok());
  }
};

// Seconds from now to `t`.
double SecondsUntil(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t - std::chrono::system_clock::now()).count();
}

TEST_CASE("a system client sends the key and the deadline of its options") {
  Fixture f;
  SystemClient<v1::AdminService> admin(std::make_shared<ChannelRef>(f.Channel()), kSystemSecret,
                                       "the admin API", {.deadline = absl::Seconds(7)});
  v1::ListApiKeysResponse resp;
  REQUIRE(admin.Call(&v1::AdminService::Stub::ListApiKeys, v1::ListApiKeysRequest(), &resp).ok());
  CHECK(f.adapter.authorization() == std::string("Bearer ") + kSystemSecret);
  // Deadlines are wall-clock times: allow for the call's own (short) duration and for gRPC's
  // rounding of the timeout it sends.
  CHECK(SecondsUntil(f.adapter.deadline()) > 5.0);
  CHECK(SecondsUntil(f.adapter.deadline()) < 8.0);

  // A call may set its own deadline.
  REQUIRE(admin
              .Call(&v1::AdminService::Stub::ListApiKeys, v1::ListApiKeysRequest(), &resp,
                    absl::Minutes(2))
              .ok());
  CHECK(SecondsUntil(f.adapter.deadline()) > 118.0);
  CHECK(SecondsUntil(f.adapter.deadline()) < 121.0);
}

TEST_CASE("a person's call is user traffic for the database, a component's is control traffic") {
  Fixture f;
  auto channel = std::make_shared<ChannelRef>(f.Channel());
  v1::WhoAmIResponse resp;
  SystemClient<v1::AdminService> component(channel, kSystemSecret, "the admin API", {});
  REQUIRE(component.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp).ok());
  CHECK(f.handler->traffic == store::TrafficClass::kControl);
  SystemClient<v1::AdminService> person(channel, kUserSecret, "the admin API", {});
  REQUIRE(person.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp).ok());
  CHECK(f.handler->traffic == store::TrafficClass::kUser);
  // Outside a call, a thread is control traffic (the services' own loops).
  CHECK(store::current_traffic_class == store::TrafficClass::kControl);
}

TEST_CASE("a component's call made while it serves a person's call is that person's traffic") {
  Fixture f;
  SystemClient<v1::AdminService> component(std::make_shared<ChannelRef>(f.Channel()), kSystemSecret,
                                           "the admin API", {});
  v1::WhoAmIResponse resp;
  {
    // As in the scheduler reading runs for `mcli util`: Serve set the person's class.
    store::TrafficScope serving(store::TrafficClass::kUser);
    REQUIRE(component.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp).ok());
  }
  CHECK(resp.role() == v1::ROLE_SYSTEM);
  CHECK(f.handler->traffic == store::TrafficClass::kUser);
  REQUIRE(component.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp).ok());
  CHECK(f.handler->traffic == store::TrafficClass::kControl);
}

// The memory store, recording the traffic class of every lookup.
class CountingKeys final : public store::ApiKeyStore {
 public:
  explicit CountingKeys(std::shared_ptr<store::ApiKeyStore> inner) : inner_(std::move(inner)) {}
  absl::Status CreateKey(const store::ApiKeyRecord& record) override {
    return inner_->CreateKey(record);
  }
  absl::StatusOr<store::ApiKeyRecord> FindByHash(std::string_view hash) override {
    absl::MutexLock lock(&mu_);
    lookups_.push_back(store::current_traffic_class);
    return inner_->FindByHash(hash);
  }
  absl::StatusOr<std::vector<store::ApiKeyRecord>> FindByHashes(
      const std::vector<std::string>& hashes) override {
    return inner_->FindByHashes(hashes);
  }
  absl::StatusOr<std::vector<v1::ApiKey>> ListKeys(std::string_view user) override {
    return inner_->ListKeys(user);
  }
  absl::Status RevokeKey(std::string_view id) override { return inner_->RevokeKey(id); }
  std::vector<store::TrafficClass> Lookups() {
    absl::MutexLock lock(&mu_);
    return lookups_;
  }

 private:
  std::shared_ptr<store::ApiKeyStore> inner_;
  absl::Mutex mu_;
  std::vector<store::TrafficClass> lookups_ ABSL_GUARDED_BY(mu_);
};

// The adapter over a loopback port too: its callers there are strangers, at 127.0.0.1.
struct NetworkFixture {
  NetworkFixture() {
    auth->set_max_unknown_keys_per_address(2);  // 20 at once, 2 more a second
    store::ApiKeyRecord record;
    record.key.set_id("key-user");
    record.key.set_user("alice");
    record.key.set_role(v1::ROLE_USER);
    record.secret_hash = auth::HashSecret(kUserSecret);
    REQUIRE(keys->CreateKey(record).ok());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&adapter);
    server = builder.BuildAndStart();
    REQUIRE(server);
    REQUIRE(port > 0);
  }
  ~NetworkFixture() { server->Shutdown(); }
  absl::Status WhoAmI(const std::string& key, bool over_the_network) {
    auto channel = over_the_network ? grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                          grpc::InsecureChannelCredentials())
                                    : server->InProcessChannel(grpc::ChannelArguments());
    SystemClient<v1::AdminService> client(std::make_shared<ChannelRef>(channel), key,
                                          "the admin API", {});
    v1::WhoAmIResponse resp;
    return client.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp);
  }

  std::shared_ptr<CountingKeys> keys =
      std::make_shared<CountingKeys>(store::MakeMemoryStores().api_keys);
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<auth::Authenticator> auth = std::make_shared<auth::Authenticator>(keys, clock);
  std::shared_ptr<Handler> handler = std::make_shared<Handler>();
  Adapter adapter{handler, auth};
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

std::string MadeUpKey(int i) { return absl::StrCat("tsk_madeup", i); }

TEST_CASE(
    "made-up keys from one address stop costing lookups past its budget, while known keys and "
    "the services' own calls go on") {
  NetworkFixture f;
  // A key alice uses is cached before the flood.
  REQUIRE(f.WhoAmI(kUserSecret, true).ok());
  int refused = 0;
  for (int i = 0; i < 50; ++i) {
    const absl::Status st = f.WhoAmI(MadeUpKey(i), true);
    if (absl::IsResourceExhausted(st)) {
      ++refused;
      CHECK_THAT(std::string(st.message()),
                 Catch::Contains("too many unknown API keys from 127.0.0.1 (at most 2 a second, "
                                 "tessera-server --max-unknown-keys-per-address)"));
    } else {
      CHECK(absl::IsUnauthenticated(st));
    }
  }
  CHECK(refused == 30);  // the budget is 20 at once
  // 1 lookup of alice's key, 20 of made-up ones: the refused cost nothing, and all were user
  // traffic (a stranger's lookup never holds the control plane's connections).
  const auto lookups = f.keys->Lookups();
  CHECK(lookups.size() == 21);
  CHECK(std::count(lookups.begin(), lookups.end(), store::TrafficClass::kUser) == 21);

  // Alice's cached key still works from there; the services' own calls are not counted.
  CHECK(f.WhoAmI(kUserSecret, true).ok());
  CHECK(absl::IsUnauthenticated(f.WhoAmI(MadeUpKey(100), false)));
  CHECK(f.keys->Lookups().back() == store::TrafficClass::kControl);

  // The budget refills: a second later, two more keys are looked up.
  f.clock->Advance(absl::Seconds(1));
  CHECK(absl::IsUnauthenticated(f.WhoAmI(MadeUpKey(200), true)));
  CHECK(absl::IsUnauthenticated(f.WhoAmI(MadeUpKey(201), true)));
  CHECK(absl::IsResourceExhausted(f.WhoAmI(MadeUpKey(202), true)));
}

TEST_CASE("once 100k addresses are tracked, new ones share one budget, never a fresh one each") {
  auto clock = std::make_shared<FakeClock>();
  auth::UnknownKeyLimiter limiter(clock, 1);  // 10 at once
  for (size_t i = 0; i < auth::UnknownKeyLimiter::kMaxAddresses; ++i) {
    limiter.Failed(absl::StrCat("10.0.", i));
  }
  // Every one of those still owes a key: none may be dropped, so newcomers pool.
  for (int i = 0; i < 10; ++i) {
    const std::string newcomer = absl::StrCat("192.168.0.", i);
    REQUIRE(limiter.Admit(newcomer).ok());
    limiter.Failed(newcomer);
  }
  CHECK(absl::IsResourceExhausted(limiter.Admit("192.168.1.1")));
  CHECK(limiter.Admit("10.0.7").ok());  // a tracked address keeps its own budget
  // Once budgets are full again they make room: a newcomer has its own.
  clock->Advance(absl::Seconds(10));
  CHECK(limiter.Admit("192.168.1.1").ok());
}

TEST_CASE("the host of a peer, whatever gRPC or the gateway wrote") {
  CHECK(auth::HostOfPeer("ipv4:10.1.2.3:5678") == "10.1.2.3");
  CHECK(auth::HostOfPeer("ipv6:[::1]:5678") == "::1");
  CHECK(auth::HostOfPeer("ipv6:%5B::1%5D:5678") == "::1");
  CHECK(auth::HostOfPeer("10.1.2.3:443") == "10.1.2.3");
  CHECK(auth::HostOfPeer("[2001:db8::1]:443") == "2001:db8::1");
  CHECK(auth::HostOfPeer("unix:/run/tessera.sock") == "unix:/run/tessera.sock");
  CHECK(auth::HostOfPeer("2001:db8::1") == "2001:db8::1");
}

TEST_CASE("the default deadline is 30 s") {
  CHECK(ServiceClientOptions().deadline == absl::Seconds(30));
}

TEST_CASE("a system client is UNAVAILABLE until its channel is set, then calls through it") {
  Fixture f;
  auto channel = std::make_shared<ChannelRef>();
  SystemClient<v1::AdminService> admin(channel, kSystemSecret, "the admin API", {});
  v1::WhoAmIResponse resp;
  auto st = admin.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp);
  CHECK(absl::IsUnavailable(st));
  CHECK(st.message() == "the admin API is not reachable yet");

  channel->Set(f.Channel());
  REQUIRE(admin.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp).ok());
  // TESSERA_UNARY_RPC authenticated the key and forwarded to the handler.
  CHECK(resp.user() == "tessera-runs");
  CHECK(resp.role() == v1::ROLE_SYSTEM);
}

TEST_CASE("a refusal comes back as the call's status, and a bad key is UNAUTHENTICATED") {
  Fixture f;
  auto channel = std::make_shared<ChannelRef>(f.Channel());
  SystemClient<v1::AdminService> admin(channel, kSystemSecret, "the admin API", {});
  v1::RevokeApiKeyRequest req;
  req.set_id("key-x");
  v1::RevokeApiKeyResponse resp;
  auto st = admin.Call(&v1::AdminService::Stub::RevokeApiKey, req, &resp);
  // The role table's answer: a service's key does not manage API keys.
  CHECK(absl::IsPermissionDenied(st));
  CHECK(st.message() ==
        "tessera.v1.AdminService/RevokeApiKey needs a key with the role user or operator or "
        "admin; tessera-runs's key is system");

  SystemClient<v1::AdminService> stranger(channel, "tsk_unknown", "the admin API", {});
  v1::WhoAmIResponse who;
  CHECK(absl::IsUnauthenticated(
      stranger.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &who)));
}

TEST_CASE("a call past its deadline is DEADLINE_EXCEEDED") {
  Fixture f;
  SystemClient<v1::AdminService> admin(std::make_shared<ChannelRef>(f.Channel()), kSystemSecret,
                                       "the admin API", {.deadline = -absl::Seconds(1)});
  v1::WhoAmIResponse resp;
  CHECK(absl::IsDeadlineExceeded(
      admin.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp)));
}

TEST_CASE("with one channel per instance, a standby's refusal moves the calls on to the leader") {
  Fixture a, b;
  a.handler->standby = true;
  auto instances = std::make_shared<ChannelRef>(
      std::vector<std::shared_ptr<grpc::Channel>>{a.Channel(), b.Channel()});
  SystemClient<v1::AdminService> client(instances, kSystemSecret, "the scheduler", {});
  v1::WhoAmIResponse resp;
  REQUIRE(client.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp).ok());
  CHECK(a.handler->calls == 1);
  CHECK(b.handler->calls == 1);
  // Later calls go straight to the instance that answered.
  REQUIRE(client.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp).ok());
  CHECK(a.handler->calls == 1);
  CHECK(b.handler->calls == 2);

  // A failover: b stands by, a leads.
  b.handler->standby = true;
  a.handler->standby = false;
  REQUIRE(client.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp).ok());
  CHECK(b.handler->calls == 3);
  CHECK(a.handler->calls == 2);

  // No leader: each instance is asked once, and the refusal comes back.
  a.handler->standby = true;
  auto st = client.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp);
  CHECK(IsStandbyRefusal(st));
  CHECK(a.handler->calls + b.handler->calls == 7);
}

TEST_CASE("a leader's own UNAVAILABLE is returned rather than a standby's refusal") {
  Fixture a, b;
  a.handler->own_failure = absl::UnavailableError("the worker of node n1 is not connected");
  b.handler->standby = true;
  auto instances = std::make_shared<ChannelRef>(
      std::vector<std::shared_ptr<grpc::Channel>>{a.Channel(), b.Channel()});
  SystemClient<v1::AdminService> client(instances, kSystemSecret, "the scheduler", {});
  v1::WhoAmIResponse resp;
  auto st = client.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp);
  CHECK(st.message() == "the worker of node n1 is not connected");
  // An error that is not UNAVAILABLE is the answer: nobody else is asked.
  Fixture c;
  c.handler->own_failure = absl::NotFoundError("no node n9");
  auto one = std::make_shared<ChannelRef>(
      std::vector<std::shared_ptr<grpc::Channel>>{c.Channel(), b.Channel()});
  SystemClient<v1::AdminService> other(one, kSystemSecret, "the scheduler", {});
  const int before = b.handler->calls;
  CHECK(absl::IsNotFound(other.Call(&v1::AdminService::Stub::WhoAmI, v1::WhoAmIRequest(), &resp)));
  CHECK(b.handler->calls == before);
}

}  // namespace system_client_test
}  // namespace tessera
