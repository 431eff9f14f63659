// StreamLogs served on the async API (log_service.h): a follow is a reactor and a wait in the
// StreamPump, not a thread. Real gRPC over loopback, the memory store, the real clock.
#include <dirent.h>

#include <catch2/catch.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "services/admin/admin_handler.h"
#include "services/logs/log_service.h"
#include "tests/support/loopback_host.h"
#include "tests/support/poll_until.h"
#include "tests/support/stream_reader.h"
#include "tests/unit/logs/log_test_fixture.h"

namespace tessera::logs {
namespace stream_logs_service_test {

using testing::FakeRuns;
using testing::kOut;

// The threads of this process now.
int ThreadCount() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/task");
  REQUIRE(d != nullptr);
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

using Follower = tessera::testing::StreamReader<v1::GetLogsRequest, v1::LogLines>;

// One follow of `request` as `key`'s holder: the texts of the lines it gets.
std::unique_ptr<Follower> Follow(v1::LogService::Stub& stub, const std::string& key,
                                 v1::GetLogsRequest request) {
  return std::make_unique<Follower>(
      key, std::move(request),
      [](const v1::LogLines& m, std::vector<std::string>& texts) {
        for (const auto& l : m.lines()) texts.push_back(l.text());
      },
      [&stub](grpc::ClientContext* ctx, const v1::GetLogsRequest* req,
              grpc::ClientReadReactor<v1::LogLines>* r) { stub.async()->StreamLogs(ctx, req, r); });
}

// Far longer than anything here waits for: a follow that ends or gets a line did so because it
// was woken, not because it polled.
constexpr absl::Duration kNoPoll = absl::Hours(1);
// What the test waits at most for something that should come at once.
constexpr absl::Duration kPatience = absl::Seconds(30);

struct Served {
  explicit Served(LogHandlerOptions options) {
    auth->set_max_streams_per_user(1000);
    v1::CreateApiKeyRequest req;
    req.set_user("alice");
    req.set_role(v1::ROLE_USER);
    alice_key = *admin::CreateApiKeyDirect(*stores.api_keys, *clock, req);
    req.set_user("bob");
    bob_key = *admin::CreateApiKeyDirect(*stores.api_keys, *clock, req);
    handler = std::make_shared<LogHandler>(stores.logs, runs, clock, options, registry);
    service = std::make_unique<LogService>(handler, auth);
    host = tessera::testing::ServeOnLoopback({service.get()});
    stub = v1::LogService::NewStub(tessera::testing::LoopbackChannel(*host));
  }
  ~Served() {
    host->Shutdown();
    host.reset();
    service.reset();
  }

  void AddRun(const std::string& name, v1::RunStatus status) {
    v1::RunDescription d;
    d.mutable_run()->set_id("id-" + name);
    d.mutable_run()->set_name(name);
    d.mutable_run()->set_user("alice");
    d.mutable_run()->set_status(status);
    auto* a = d.add_attempts();
    a->set_run_id("id-" + name);
    a->set_first_failed_rank(-1);
    runs->Set(d);
  }
  // Pushes lines first..last of rank 0's stdout as the worker would.
  void Push(const std::string& run, int first, int last) {
    v1::LogBatch batch;
    batch.set_idempotency_key(absl::StrCat(run, "-", first));
    batch.set_node_name("node-x");
    for (int i = first; i <= last; ++i) {
      v1::LogLine& l = *batch.add_lines();
      l.set_run_id("id-" + run);
      l.set_stream(kOut);
      l.set_sequence(i);
      *l.mutable_time() = ToProtoTime(absl::Now());
      l.set_text(absl::StrCat("line ", i));
    }
    v1::LogAck ack;
    REQUIRE(handler->PushBatch(worker, batch, &ack).ok());
  }
  static v1::GetLogsRequest Follow(const std::string& run) {
    v1::GetLogsRequest req;
    req.set_run_name(run);
    req.set_follow(true);
    return req;
  }
  // Waits until `n` follows wait in the pump.
  bool WaitForWaiting(size_t n) {
    return tessera::testing::PollUntil([&] { return service->follows_waiting() == n; }, kPatience);
  }

  std::shared_ptr<Clock> clock = SystemClock::Shared();
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<FakeRuns> runs = std::make_shared<FakeRuns>();
  std::shared_ptr<auth::Authenticator> auth =
      std::make_shared<auth::Authenticator>(stores.api_keys, clock, absl::Milliseconds(100));
  metrics::Registry registry;
  std::string alice_key, bob_key;
  std::shared_ptr<LogHandler> handler;
  std::unique_ptr<LogService> service;
  std::unique_ptr<ServiceHost> host;
  std::unique_ptr<v1::LogService::Stub> stub;
  auth::Principal worker{"worker", v1::ROLE_SYSTEM};
};

TEST_CASE("open log follows hold no thread each, and each gets the lines pushed as they commit") {
  // The run's end is seen at a check, which only a wake makes: the poll stays short for it.
  LogHandlerOptions options;
  options.run_check_interval = absl::Milliseconds(100);
  options.end_grace = absl::Milliseconds(200);
  Served s(options);
  s.AddRun("r", v1::RUN_STATUS_RUNNING);
  s.Push("r", 0, 2);
  const int before = ThreadCount();
  constexpr int kFollows = 300;
  std::vector<std::unique_ptr<Follower>> follows;
  for (int i = 0; i < kFollows; ++i) {
    follows.push_back(Follow(*s.stub, s.alice_key, Served::Follow("r")));
  }
  for (auto& f : follows) REQUIRE(f->WaitFor(3, kPatience) == 3);
  // Each caught up and waits as an entry of the pump, not on a thread of its own: the process
  // (server and client alike) grew by a few threads, not by one per follow.
  REQUIRE(s.WaitForWaiting(kFollows));
  const int grown = ThreadCount() - before;
  INFO("threads before " << before << ", grown by " << grown << " for " << kFollows << " follows");
  CHECK(grown < kFollows / 10);

  s.Push("r", 3, 4);
  for (auto& f : follows) REQUIRE(f->WaitFor(5, kPatience) == 5);
  CHECK(follows.front()->items() ==
        std::vector<std::string>{"line 0", "line 1", "line 2", "line 3", "line 4"});

  s.AddRun("r", v1::RUN_STATUS_COMPLETED);
  for (auto& f : follows) {
    auto end = f->WaitForEnd(kPatience);
    REQUIRE(end.has_value());
    CHECK(end->error_code() == grpc::StatusCode::OK);
  }
  CHECK(s.service->follows_waiting() == 0);
}

TEST_CASE(
    "a follow whose reader went away, or whose key was revoked, ends at once, not at a poll") {
  LogHandlerOptions options;
  options.poll_interval = kNoPoll;
  options.run_check_interval = kNoPoll;
  Served s(options);
  s.AddRun("r", v1::RUN_STATUS_RUNNING);
  s.Push("r", 0, 0);

  SECTION("the reader cancels") {
    auto f = Follow(*s.stub, s.alice_key, Served::Follow("r"));
    REQUIRE(f->WaitFor(1, kPatience) == 1);
    REQUIRE(s.WaitForWaiting(1));
    f->Cancel();
    // Only the cancel's wake can end it: the follow's next poll is an hour away.
    CHECK(s.WaitForWaiting(0));
    REQUIRE(f->WaitForEnd(kPatience).has_value());
  }
  SECTION("her key is revoked: the follow ends UNAUTHENTICATED at its next wake, naming why") {
    auto f = Follow(*s.stub, s.alice_key, Served::Follow("r"));
    REQUIRE(f->WaitFor(1, kPatience) == 1);
    REQUIRE(s.WaitForWaiting(1));
    auto keys = s.stores.api_keys->ListKeys("alice");
    REQUIRE(keys.ok());
    REQUIRE(keys->size() == 1);
    REQUIRE(s.stores.api_keys->RevokeKey(keys->front().id()).ok());
    // Each line of her run wakes her follow; the guard's check then ends it once the
    // authenticator's cached answer (100 ms) runs out.
    std::optional<grpc::Status> end;
    for (int i = 1; !end && i < 3000; ++i) {
      s.Push("r", i, i);
      end = f->WaitForEnd(absl::Milliseconds(10));
    }
    REQUIRE(end.has_value());
    CHECK(end->error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK_THAT(end->error_message(), Catch::Contains("revoked"));
  }
}

TEST_CASE("a follow is woken by its own run's lines, not by every run's") {
  LogHandlerOptions options;
  options.poll_interval = kNoPoll;
  options.run_check_interval = kNoPoll;
  Served s(options);
  s.AddRun("r", v1::RUN_STATUS_RUNNING);
  s.AddRun("other", v1::RUN_STATUS_RUNNING);
  s.Push("r", 0, 0);
  auto f = Follow(*s.stub, s.alice_key, Served::Follow("r"));
  REQUIRE(f->WaitFor(1, kPatience) == 1);
  REQUIRE(s.WaitForWaiting(1));
  const uint64_t woken = s.service->follows_woken();
  // Another run prints: her follow is not stepped for it (pushes are published as they return).
  for (int i = 0; i < 50; ++i) s.Push("other", i, i);
  CHECK(s.service->follows_woken() == woken);
  CHECK(s.service->follows_waiting() == 1);
  // Her run prints: woken once, and the line arrives.
  s.Push("r", 1, 1);
  REQUIRE(f->WaitFor(2, kPatience) == 2);
  CHECK(s.service->follows_woken() > woken);
  CHECK(f->items() == std::vector<std::string>{"line 0", "line 1"});
}

TEST_CASE("StreamLogs on the async API: reads, refusals and errors as before") {
  Served s(LogHandlerOptions{});
  s.AddRun("r", v1::RUN_STATUS_COMPLETED);
  // More than a page and a message: read page by page, in order.
  constexpr int kLines = 5000;
  for (int first = 0; first < kLines; first += 500) s.Push("r", first, first + 499);
  v1::GetLogsRequest all;
  all.set_run_name("r");
  {
    auto f = Follow(*s.stub, s.alice_key, all);
    auto end = f->WaitForEnd(kPatience);
    REQUIRE(end.has_value());
    CHECK(end->ok());
    const auto texts = f->items();
    REQUIRE(texts.size() == kLines);
    for (int i = 0; i < kLines; i += 997) CHECK(texts[i] == absl::StrCat("line ", i));
  }
  SECTION("no key") {
    auto f = Follow(*s.stub, "", all);
    auto end = f->WaitForEnd(kPatience);
    REQUIRE(end.has_value());
    CHECK(end->error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  SECTION("another user's run is not found") {
    auto f = Follow(*s.stub, s.bob_key, all);
    auto end = f->WaitForEnd(kPatience);
    REQUIRE(end.has_value());
    CHECK(end->error_code() == grpc::StatusCode::NOT_FOUND);
  }
  SECTION("a bad request names its field") {
    v1::GetLogsRequest bad = all;
    bad.set_tail(-1);
    auto f = Follow(*s.stub, s.alice_key, bad);
    auto end = f->WaitForEnd(kPatience);
    REQUIRE(end.has_value());
    CHECK(end->error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(end->error_message(), Catch::Contains("tail"));
  }
}

TEST_CASE("the server shuts down with follows open: they end, and the shutdown does not hang") {
  LogHandlerOptions options;
  options.poll_interval = kNoPoll;
  auto s = std::make_unique<Served>(options);
  s->AddRun("r", v1::RUN_STATUS_RUNNING);
  s->Push("r", 0, 0);
  std::vector<std::unique_ptr<Follower>> follows;
  for (int i = 0; i < 20; ++i) {
    follows.push_back(Follow(*s->stub, s->alice_key, Served::Follow("r")));
  }
  for (auto& f : follows) REQUIRE(f->WaitFor(1, kPatience) == 1);
  REQUIRE(s->WaitForWaiting(20));
  s->host->Shutdown();
  for (auto& f : follows) {
    auto end = f->WaitForEnd(kPatience);
    REQUIRE(end.has_value());
    CHECK_FALSE(end->ok());
  }
  follows.clear();
  s.reset();
}

}  // namespace stream_logs_service_test
}  // namespace tessera::logs
