// Attacks of one tenant on what every tenant shares: the run lists and the scheduler's queue
// (runs made as large as the spec allows), and open streams whose key was revoked. Each case names
// the attack, asserts that it fails, and that the victim is unharmed.
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/control_plane.h"
#include "tests/support/local_cluster.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace tenant_limits_test {

v1::RunSpec SpecOf(const std::string& name, const std::string& command, int gpus) {
  v1::RunSpec spec;
  spec.set_name(name);
  spec.set_image("host");
  spec.set_command(command);
  spec.mutable_compute()->set_gpus(gpus);
  return spec;
}

TEST_CASE("attack: runs with 1 MB commands break everyone's list and the queue; they do not",
          "[security]") {
  constexpr int kFlood = 70;  // 70 MB of commands: over gRPC's 64 MiB if a list carried them
  LocalCluster c({"--max-waiting-runs-per-user", std::to_string(kFlood)});
  c.StartWorker("node-a", 2);
  Client bob(c.server.endpoint(), CreateKey(c.database_url, "bob", "user"));
  Client mallory(c.server.endpoint(), CreateKey(c.database_url, "mallory", "user"));
  const v1::Run victim = SubmitSpec(bob, SpecOf("victim", "sleep 600", 1));
  bob.WaitForStatus(victim.name(), v1::RUN_STATUS_RUNNING, absl::Seconds(60));

  // Low priority and two GPUs: they wait behind bob's run, all in the queue the scheduler reads.
  v1::RunSpec heavy = SpecOf("heavy", "exit 0 # " + std::string(1'000'000, 'x'), 2);
  heavy.mutable_scheduling()->set_priority(v1::PRIORITY_LOW);
  for (int i = 0; i < kFlood; ++i) SubmitSpec(mallory, heavy);
  // One more is past her limit of waiting runs, and the error says which limit.
  v1::SubmitRunRequest more;
  *more.mutable_spec() = heavy;
  more.mutable_spec()->mutable_compute()->set_cluster("local");
  v1::SubmitRunResponse refused;
  const grpc::Status over = mallory.runs->SubmitRun(mallory.Ctx().get(), more, &refused);
  CHECK(over.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(absl::StrContains(over.error_message(), "--max-waiting-runs-per-user 70"));

  // Everyone's list answers, small: an admin's unfiltered one holds every run in one reply.
  v1::ListRunsResponse all;
  const grpc::Status listed =
      c.client->runs->ListRuns(c.client->Ctx().get(), v1::ListRunsRequest(), &all);
  INFO(listed.error_message());
  REQUIRE(listed.ok());
  CHECK(all.runs_size() == kFlood + 1);
  CHECK(all.ByteSizeLong() < 1'000'000);
  CHECK(all.next_page_token().empty());
  const ShellResult table = c.Mcli("get runs");
  INFO(table.output.substr(0, 2000));
  CHECK(table.exit_code == 0);
  CHECK(absl::StrContains(table.output, victim.name()));
  // The scheduler still places: bob's next run starts on the free GPU.
  const v1::Run next = SubmitSpec(bob, SpecOf("next", "sleep 600", 1));
  bob.WaitForStatus(next.name(), v1::RUN_STATUS_RUNNING, absl::Seconds(60));
  const v1::Run still = bob.Get(victim.name());
  CHECK(still.status() == v1::RUN_STATUS_RUNNING);
  CHECK(still.resumption_index() == 0);
  // The whole run is still there for its owner.
  CHECK(mallory.Get(all.runs(0).name()).spec().command().size() > 1'000'000);
}

// A run of alice's that prints a line 5 times a second until stopped, RUNNING.
v1::Run StartChattyRun(Client& alice) {
  const v1::Run run =
      SubmitSpec(alice, SpecOf("chatty", "while true; do echo tick; sleep 0.2; done", 1));
  alice.WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING, absl::Seconds(60));
  return run;
}

// A call's context carrying `key` (and a deadline, when given).
std::unique_ptr<grpc::ClientContext> KeyedContext(const std::string& key,
                                                  std::optional<int> deadline_seconds = {}) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + key);
  if (deadline_seconds) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(*deadline_seconds));
  }
  return ctx;
}

// Reads `reader` to its end on a thread of its own; `ended` is the stream's status.
template <class Reader, class Message>
std::thread ReadToEnd(Reader* reader, grpc::Status* ended) {
  return std::thread([reader, ended] {
    Message m;
    while (reader->Read(&m)) {
    }
    *ended = reader->Finish();
  });
}

TEST_CASE("attack: a revoked operator key keeps its open watches and follows; they end",
          "[security]") {
  LocalCluster c;
  c.StartWorker("node-a", 1);
  const std::string ops_key = CreateKey(c.database_url, "ops", "operator");
  Client alice(c.server.endpoint(), CreateKey(c.database_url, "alice", "user"));
  const v1::Run run = StartChattyRun(alice);

  // The operator opens what an operator may: every user's run changes, alice's log follow,
  // node events.
  auto channel = grpc::CreateChannel(c.server.endpoint(), grpc::InsecureChannelCredentials());
  auto runs = v1::RunService::NewStub(channel);
  auto logs = v1::LogService::NewStub(channel);
  auto cordon = v1::CordonService::NewStub(channel);
  auto watch_ctx = KeyedContext(ops_key, 120), follow_ctx = KeyedContext(ops_key, 120),
       events_ctx = KeyedContext(ops_key, 120);
  auto watch = runs->WatchRuns(watch_ctx.get(), v1::WatchRunsRequest());
  v1::GetLogsRequest follow_req;
  follow_req.set_run_name(run.name());
  follow_req.set_follow(true);
  auto follow = logs->StreamLogs(follow_ctx.get(), follow_req);
  auto events = cordon->WatchNodeEvents(events_ctx.get(), v1::WatchNodeEventsRequest());
  // The follow delivers while the key holds.
  v1::LogLines first;
  REQUIRE(follow->Read(&first));

  grpc::Status watch_end, follow_end, events_end;
  std::thread watch_reader =
      ReadToEnd<decltype(watch)::element_type, v1::RunChange>(watch.get(), &watch_end);
  std::thread follow_reader =
      ReadToEnd<decltype(follow)::element_type, v1::LogLines>(follow.get(), &follow_end);
  std::thread events_reader =
      ReadToEnd<decltype(events)::element_type, v1::NodeEvent>(events.get(), &events_end);

  v1::ListApiKeysResponse keys;
  REQUIRE(
      c.client->admin->ListApiKeys(c.client->Ctx().get(), v1::ListApiKeysRequest(), &keys).ok());
  std::string ops_id;
  for (const auto& k : keys.keys()) {
    if (k.user() == "ops" && !k.revoked()) ops_id = k.id();
  }
  REQUIRE_FALSE(ops_id.empty());
  v1::RevokeApiKeyRequest revoke;
  revoke.set_id(ops_id);
  v1::RevokeApiKeyResponse revoked;
  const absl::Time revoked_at = absl::Now();
  REQUIRE(c.client->admin->RevokeApiKey(c.client->Ctx().get(), revoke, &revoked).ok());
  watch_reader.join();
  follow_reader.join();
  events_reader.join();
  const absl::Duration took = absl::Now() - revoked_at;
  // Each ends with why (not at its 120 s deadline): the key's cached answer holds 5 s, then the
  // store is asked again.
  for (const grpc::Status* ended : {&watch_end, &follow_end, &events_end}) {
    INFO(ended->error_message());
    CHECK(ended->error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(absl::StrContains(ended->error_message(), "was revoked"));
  }
  CHECK(took < absl::Seconds(60));
  // The run the operator followed is untouched.
  const v1::Run after = alice.Get(run.name());
  CHECK(after.status() == v1::RUN_STATUS_RUNNING);
  CHECK(after.resumption_index() == 0);
}

TEST_CASE("attack: one user opens follows and watches without end; the rest still can",
          "[security]") {
  LocalCluster c({"--max-streams-per-user", "3"});
  c.StartWorker("node-a", 1);
  Client alice(c.server.endpoint(), CreateKey(c.database_url, "alice", "user"));
  Client bob(c.server.endpoint(), CreateKey(c.database_url, "bob", "user"));
  const v1::Run run = StartChattyRun(alice);
  auto channel = grpc::CreateChannel(c.server.endpoint(), grpc::InsecureChannelCredentials());
  auto logs = v1::LogService::NewStub(channel);
  auto runs = v1::RunService::NewStub(channel);
  v1::GetLogsRequest follow;
  follow.set_run_name(run.name());
  follow.set_follow(true);
  // Her three follows deliver; a fourth stream of hers, of any kind, is refused at once.
  std::vector<std::unique_ptr<grpc::ClientContext>> held;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::LogLines>>> follows;
  for (int i = 0; i < 3; ++i) {
    held.push_back(KeyedContext(alice.key));
    follows.push_back(logs->StreamLogs(held.back().get(), follow));
    v1::LogLines lines;
    REQUIRE(follows.back()->Read(&lines));
  }
  auto extra_ctx = KeyedContext(alice.key);
  auto extra = runs->WatchRuns(extra_ctx.get(), v1::WatchRunsRequest());
  v1::RunChange change;
  CHECK_FALSE(extra->Read(&change));
  const grpc::Status refused = extra->Finish();
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(absl::StrContains(refused.error_message(), "--max-streams-per-user 3"));
  // Another user is not held by hers.
  auto bob_ctx = KeyedContext(bob.key);
  auto bobs = runs->WatchRuns(bob_ctx.get(), v1::WatchRunsRequest());
  bobs->WaitForInitialMetadata();  // sent once his watch has started
  bob_ctx->TryCancel();
  CHECK(bobs->Finish().error_code() == grpc::StatusCode::CANCELLED);
  // A follow she closes gives its slot back.
  held[0]->TryCancel();
  follows[0]->Finish();
  grpc::Status again;
  for (int i = 0; i < 50; ++i) {  // the service sees the cancel at its next poll
    auto ctx = KeyedContext(alice.key, 2);
    v1::GetLogsRequest once = follow;
    once.set_follow(false);
    auto reader = logs->StreamLogs(ctx.get(), once);
    v1::LogLines lines;
    while (reader->Read(&lines)) {
    }
    again = reader->Finish();
    if (again.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(again.error_message());
  CHECK(again.ok());
  for (size_t i = 1; i < held.size(); ++i) {
    held[i]->TryCancel();
    follows[i]->Finish();
  }
  CHECK(alice.Get(run.name()).status() == v1::RUN_STATUS_RUNNING);
}

TEST_CASE(
    "attack: follows and watches held open for ever, each ends at its lifetime, and mcli "
    "goes on through it with every line once",
    "[security]") {
  constexpr int kLifetimeSeconds = 2;
  LocalCluster c({"--max-stream-lifetime-seconds", std::to_string(kLifetimeSeconds)});
  c.StartWorker("node-a", 1);
  Client alice(c.server.endpoint(), CreateKey(c.database_url, "alice", "user"));
  // 80 numbered lines on each stream, 0.1 s apart: several lifetimes long.
  const v1::Run counter =
      SubmitSpec(alice, SpecOf("counter",
                               "i=0; while [ $i -lt 80 ]; do echo out-$i; echo err-$i >&2; "
                               "i=$((i+1)); sleep 0.1; done",
                               1));
  alice.WaitForStatus(counter.name(), v1::RUN_STATUS_RUNNING, absl::Seconds(60));

  // Her own follow, held: it ends with UNAVAILABLE naming the lifetime while the run goes on.
  auto channel = grpc::CreateChannel(c.server.endpoint(), grpc::InsecureChannelCredentials());
  auto logs = v1::LogService::NewStub(channel);
  v1::GetLogsRequest follow;
  follow.set_run_name(counter.name());
  follow.set_follow(true);
  auto ctx = KeyedContext(alice.key, 120);
  auto held = logs->StreamLogs(ctx.get(), follow);
  grpc::Status held_end;
  ReadToEnd<decltype(held)::element_type, v1::LogLines>(held.get(), &held_end).join();
  INFO(held_end.error_message());
  CHECK(held_end.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(absl::StrContains(held_end.error_message(), "maximum lifetime (2s)"));
  CHECK(alice.Get(counter.name()).status() == v1::RUN_STATUS_RUNNING);

  // A second run waits for the node while the counter runs: `mcli run submit --follow` watches
  // it (a watch that outlives its lifetime too), then follows its lines.
  const TempDir dir("tessera-stream-lifetime");
  const std::string yaml = dir.Write("after.yaml", R"(name: after
image: host
command: echo after-the-counter
compute:
  gpus: 1
)");
  ShellResult submitted;
  std::thread submitter([&] { submitted = c.Mcli("run submit -f " + yaml + " --follow"); });
  // mcli follows the counter through every end of its stream: each line once, none lost.
  const absl::Time began = absl::Now();
  const ShellResult followed = c.Mcli("logs -f " + counter.name());
  const absl::Duration took = absl::Now() - began;
  submitter.join();
  INFO(followed.output);
  REQUIRE(followed.exit_code == 0);
  CHECK(took > absl::Seconds(kLifetimeSeconds));  // so it went through at least one end
  std::map<std::string, int> seen;
  for (absl::string_view line : absl::StrSplit(followed.output, '\n')) {
    if (!absl::ConsumePrefix(&line, "[node 0] ")) absl::ConsumePrefix(&line, "[rank 0] ");
    if (!line.empty()) ++seen[std::string(line)];
  }
  for (int i = 0; i < 80; ++i) {
    INFO(i);
    CHECK(seen[absl::StrCat("out-", i)] == 1);
    CHECK(seen[absl::StrCat("err-", i)] == 1);
  }
  CHECK(seen.size() == 160);
  CHECK_FALSE(absl::StrContains(followed.output, "Reconnecting"));  // a lifetime is routine
  INFO(submitted.output);
  CHECK(submitted.exit_code == 0);
  CHECK(absl::StrContains(submitted.output, "after-the-counter"));
  CHECK(absl::StrContains(submitted.output, "COMPLETED"));
}

TEST_CASE(
    "attack: one user calls as fast as the server answers, every call a database read, "
    "and is held to a rate; others are not",
    "[security]") {
  LocalCluster c({"--max-calls-per-user-per-second", "2"});  // 20 at once
  Client mallory(c.server.endpoint(), CreateKey(c.database_url, "mallory", "user"));
  Client bob(c.server.endpoint(), CreateKey(c.database_url, "bob", "user"));
  int served = 0;
  grpc::Status refused;
  for (int i = 0; i < 60 && refused.ok(); ++i) {
    v1::ListRunsResponse listed;
    const grpc::Status st =
        mallory.runs->ListRuns(mallory.Ctx().get(), v1::ListRunsRequest(), &listed);
    if (st.ok())
      ++served;
    else
      refused = st;
  }
  INFO(refused.error_message());
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(absl::StrContains(refused.error_message(), "--max-calls-per-user-per-second 2"));
  CHECK(served >= 20);
  CHECK(served < 60);
  // Bob and the admin are served meanwhile.
  v1::ListRunsResponse listed;
  CHECK(bob.runs->ListRuns(bob.Ctx().get(), v1::ListRunsRequest(), &listed).ok());
  for (int i = 0; i < 30; ++i) {
    REQUIRE(c.client->runs->ListRuns(c.client->Ctx().get(), v1::ListRunsRequest(), &listed).ok());
  }
}

}  // namespace tenant_limits_test
}  // namespace tessera::testing
