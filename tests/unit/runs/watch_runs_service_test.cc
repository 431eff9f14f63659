// WatchRuns served on the async API (run_service.h): a watch is a reactor and a wait in the
// StreamPump, woken by the run manager's RunEventTail, not a thread. Real gRPC over loopback,
// the memory stores and their change feed, the real clock.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "services/admin/admin_handler.h"
#include "services/runs/run_service.h"
#include "tests/support/loopback_host.h"
#include "tests/support/poll_until.h"
#include "tests/support/process_stats.h"
#include "tests/support/stream_reader.h"
#include "tests/unit/runs/run_manager_fixture.h"

namespace tessera::runs {
namespace watch_runs_service_test {

using Watcher = tessera::testing::StreamReader<v1::WatchRunsRequest, v1::RunChange>;

// One watch of every run `key`'s holder may see: the names of the runs it is sent.
std::unique_ptr<Watcher> Watch(v1::RunService::Stub& stub, const std::string& key) {
  return std::make_unique<Watcher>(
      key, v1::WatchRunsRequest{},
      [](const v1::RunChange& c, std::vector<std::string>& names) {
        names.push_back(c.run().name());
      },
      [&stub](grpc::ClientContext* ctx, const v1::WatchRunsRequest* req,
              grpc::ClientReadReactor<v1::RunChange>* r) { stub.async()->WatchRuns(ctx, req, r); });
}

// Far longer than the test: a watch that gets a change got it because it was woken.
constexpr absl::Duration kNoCheck = absl::Hours(1);
constexpr absl::Duration kPatience = absl::Seconds(30);

struct Served {
  Served() {
    auth->set_max_streams_per_user(1000);
    v1::CreateApiKeyRequest req;
    req.set_role(v1::ROLE_USER);
    req.set_user("alice");
    alice_key = *admin::CreateApiKeyDirect(*stores.api_keys, *clock, req);
    req.set_user("bob");
    bob_key = *admin::CreateApiKeyDirect(*stores.api_keys, *clock, req);
    Runs roles = MakeRuns(
        RunsDependencies{.runs = stores.runs,
                         .idem = std::make_shared<IdempotentCalls>(stores.idempotency, clock),
                         .fit = fit,
                         .clock = clock,
                         .random = std::make_shared<SeededRandom>(7),
                         .options = RunManagerOptions{.allow_host_image = true},
                         .changes = stores.changes});
    manager = roles.manager;
    service = std::make_unique<RunService>(manager, roles.reports, auth, kNoCheck);
    host = tessera::testing::ServeOnLoopback({service.get()});
    stub = v1::RunService::NewStub(tessera::testing::LoopbackChannel(*host));
  }
  ~Served() {
    host->Shutdown();
    host.reset();
    service.reset();
  }
  std::string Submit(const auth::Principal& who, const std::string& name) {
    v1::SubmitRunRequest req;
    req.mutable_spec()->set_name(name);
    req.mutable_spec()->set_command("echo hi");
    req.mutable_spec()->mutable_compute()->set_gpus(8);
    v1::SubmitRunResponse resp;
    REQUIRE(manager->SubmitRun(who, req, &resp).ok());
    return resp.run().name();
  }
  bool WaitForWaiting(size_t n) {
    return tessera::testing::PollUntil([&] { return service->watches_waiting() == n; }, kPatience);
  }

  std::shared_ptr<Clock> clock = SystemClock::Shared();
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<testing::FakeFit> fit = std::make_shared<testing::FakeFit>();
  std::shared_ptr<auth::Authenticator> auth =
      std::make_shared<auth::Authenticator>(stores.api_keys, clock, absl::Milliseconds(100));
  std::string alice_key, bob_key;
  std::shared_ptr<RunManager> manager;
  std::unique_ptr<RunService> service;
  std::unique_ptr<ServiceHost> host;
  std::unique_ptr<v1::RunService::Stub> stub;
  auth::Principal alice{"alice", v1::ROLE_USER};
  auth::Principal bob{"bob", v1::ROLE_USER};
};

TEST_CASE("open run watches hold no thread each, and each is woken by its own user's changes") {
  Served s;
  const int before = tessera::testing::ThreadsOf(getpid());
  constexpr int kWatches = 300;
  std::vector<std::unique_ptr<Watcher>> alices, bobs;
  for (int i = 0; i < kWatches / 2; ++i) {
    alices.push_back(Watch(*s.stub, s.alice_key));
    bobs.push_back(Watch(*s.stub, s.bob_key));
  }
  for (auto& w : alices) REQUIRE(w->WaitForStart(kPatience));
  for (auto& w : bobs) REQUIRE(w->WaitForStart(kPatience));
  REQUIRE(s.WaitForWaiting(kWatches));
  const int grown = tessera::testing::ThreadsOf(getpid()) - before;
  INFO("threads before " << before << ", grown by " << grown << " for " << kWatches << " watches");
  CHECK(grown < kWatches / 10);

  const uint64_t reads_before = s.manager->event_tail().reads();
  const absl::Time since = absl::Now();
  const uint64_t commits_before = s.stores.changes->Generation(store::ChangeTopic::kRunEvents);
  const std::string name = s.Submit(s.alice, "mine");
  // Woken (the check is an hour away), each alice watch gets her run's change; bob's none.
  for (auto& w : alices) {
    REQUIRE(w->WaitFor(1, kPatience) >= 1);
    CHECK(w->items().front() == name);
  }
  const std::string bobs_run = s.Submit(s.bob, "his");
  for (auto& w : bobs) {
    REQUIRE(w->WaitFor(1, kPatience) >= 1);
    for (const auto& n : w->items()) CHECK(n == bobs_run);  // never alice's
  }
  for (auto& w : alices) {
    for (const auto& n : w->items()) CHECK(n == name);  // never bob's
  }
  // Every watch read what it sent from the tail: one read of the store per commit, and one
  // more per fresh_for (the default, 200 ms) when the feed said nothing, whatever the number
  // of watches.
  const uint64_t commits =
      s.stores.changes->Generation(store::ChangeTopic::kRunEvents) - commits_before;
  const auto stale_reads =
      static_cast<uint64_t>((absl::Now() - since) / RunEventTailOptions{}.fresh_for) + 1;
  const uint64_t reads = s.manager->event_tail().reads() - reads_before;
  INFO(reads << " reads for " << commits << " commits in " << (absl::Now() - since));
  CHECK(reads <= commits + stale_reads);
  CHECK(reads < static_cast<uint64_t>(kWatches));
}

}  // namespace watch_runs_service_test
}  // namespace tessera::runs
