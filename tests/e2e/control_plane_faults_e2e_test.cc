// Faults of Tessera itself under a real 2-node tessera-train run (PostgreSQL, tessera-server,
// tessera-worker daemons, real ranks): none may cost the run an interruption, a step or a line.
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/timestamps.h"
#include "tests/e2e/training_helpers.h"
#include "tests/support/tcp_proxy.h"

namespace tessera::testing {
namespace control_plane_faults_e2e_test {

// Every case trains the fixture's baseline length (about kBaselineTraining at this machine's
// rate) under its fault and compares the losses with the baseline's, step for step.

// Submits the example at the baseline's length and returns the run's name.
std::string SubmitTraining(LocalCluster& c, const std::string& file) {
  ShellResult submitted = c.Mcli("run -f " + ExampleWith(c, Baseline().steps, file));
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  return std::string(absl::StripAsciiWhitespace(submitted.output));
}

// The run was still training when its fault was over: the fault was under the run, not after it.
void RequireStillTraining(LocalCluster& c, const std::string& name) {
  const v1::Run run = c.client->Get(name);
  INFO("the baseline (" << Baseline().steps << " steps at " << Baseline().steps_per_second
                        << " steps/s measured) was too short for this case's fault: the case "
                           "trained faster than the fixture did");
  REQUIRE(run.status() == v1::RUN_STATUS_RUNNING);
}

// The run completed in its first attempt with no retry or interruption of any kind, both nodes
// stayed online with no LOST event, every tenth step's loss line was stored once, and the losses
// equal the undisturbed baseline's, step for step.
void CheckCostNothing(LocalCluster& c, const std::string& name) {
  const int steps = Baseline().steps;
  const v1::Run done = WaitForCompletion(c, name, steps);
  CHECK(done.resumption_index() == 0);  // not one interruption
  CHECK(done.retries_used() == 0);
  CHECK(done.control_plane_interruptions() == 0);
  CHECK(done.progress().step() == steps);
  CHECK(c.Node("node-a").liveness() == v1::NODE_LIVENESS_ONLINE);
  CHECK(c.Node("node-b").liveness() == v1::NODE_LIVENESS_ONLINE);
  ShellResult events = c.Mcli("get events");
  INFO(events.output);
  REQUIRE(events.exit_code == 0);
  CHECK(absl::StrContains(events.output, "REGISTERED"));
  CHECK_FALSE(absl::StrContains(events.output, "LOST"));
  CheckLossesEqualBaseline(LossesIn(Rank0LogThrough(c, name, steps)), Baseline());
}

TEST_CASE("PostgreSQL stopped for 30 s under a 2-node run costs it nothing", "[e2e]") {
  LocalCluster c;
  StartTrainingWorkers(c, 2);

  const std::string name = SubmitTraining(c, "disturbed.yaml");
  const v1::Run before = WaitForStep(c, name, 20);
  REQUIRE(before.resumption_index() == 0);
  REQUIRE(c.pg->Stop().ok());
  const absl::Time stopped = absl::Now();
  // The ranks train on; the workers' heartbeats are answered from the leader's memory.
  std::this_thread::sleep_for(std::chrono::seconds(30));
  REQUIRE(c.pg->Resume().ok());
  RequireStillTraining(c, name);
  std::printf("PostgreSQL was away for %.1f s\n", absl::ToDoubleSeconds(absl::Now() - stopped));

  CheckCostNothing(c, name);
}

TEST_CASE("A run that ends while PostgreSQL is away keeps its last progress", "[e2e]") {
  LocalCluster c;
  StartTrainingWorkers(c, 2);
  const int steps = Baseline().steps;
  REQUIRE(steps >= 40);
  const std::string name = SubmitTraining(c, "ends-away.yaml");
  const v1::Run before = WaitForStep(c, name, steps - 20);
  REQUIRE(before.resumption_index() == 0);
  REQUIRE(c.pg->Stop().ok());
  const absl::Time stopped = absl::Now();
  // The ranks finish with the database away: each worker's attempt record goes once all its
  // ranks exited, and their last reports are kept by the scheduler.
  for (const std::string node : {"node-a", "node-b"}) {
    const std::string record =
        absl::StrCat(c.worker(node).state_dir, "/attempts/", before.id(), ".0.json");
    const absl::Time since = absl::Now();
    while (std::filesystem::exists(record)) {
      INFO(node << " still runs the attempt");
      REQUIRE(absl::Now() - since < kStallLimit);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  // The workers' last reports reach the scheduler within a few of their 1 s polls.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  // Which way they went is said, not required: the outcome below is what the user relies on.
  std::printf("the scheduler %s progress reports during the outage\n",
              absl::StrContains(c.server.process.Log(),
                                "progress reports kept until the run manager takes them")
                  ? "kept"
                  : "did not need to keep");
  REQUIRE(c.pg->Resume().ok());
  std::printf("PostgreSQL was away for %.1f s, until after the run ended\n",
              absl::ToDoubleSeconds(absl::Now() - stopped));

  const std::string log = c.server.process.Log();
  INFO("the server's log ends:\n" << log.substr(log.size() > 6000 ? log.size() - 6000 : 0));
  const v1::Run done = WaitForCompletion(c, name, steps);
  CHECK(done.progress().step() == steps);
  CHECK(done.resumption_index() == 0);
  ShellResult described = c.Mcli("describe run " + name);
  INFO(described.output);
  CHECK(absl::StrContains(described.output, absl::StrCat(steps, "/", steps)));
}

TEST_CASE(
    "The PostgreSQL primary killed and its synchronous standby promoted cost a 2-node run "
    "nothing and lose no acknowledged write",
    "[e2e]") {
  auto primary = PostgresServer::Start(/*ephemeral=*/false);
  REQUIRE(primary.ok());
  auto standby = PostgresServer::StartStandby(**primary);
  REQUIRE(standby.ok());
  REQUIRE((*primary)->SetSynchronousReplication(true).ok());
  // libpq tries the hosts in turn and keeps the one that takes writes.
  const std::string url =
      absl::StrCat("postgresql://tessera@127.0.0.1:", (*primary)->port(),
                   ",127.0.0.1:", (*standby)->port(), "/tessera?target_session_attrs=read-write");
  LocalCluster c(*std::move(primary), url);
  StartTrainingWorkers(c, 2);
  const std::string name = SubmitTraining(c, "disturbed.yaml");
  WaitForStep(c, name, 20);

  // Writes go on through the failover; each one mcli reports done must survive it.
  std::atomic<bool> writing{true};
  std::vector<std::string> acknowledged;
  int refused = 0;
  std::thread writer([&] {
    for (int i = 0; writing; ++i) {
      const std::string user = absl::StrCat("probe-", i);
      if (c.Mcli("admin create-api-key --user " + user + " --role user").exit_code == 0) {
        acknowledged.push_back(user);
      } else {
        ++refused;
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  REQUIRE(c.pg->Kill().ok());
  const absl::Time killed = absl::Now();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  REQUIRE((*standby)->Promote().ok());
  std::printf("the standby took writes %.1f s after the primary died\n",
              absl::ToDoubleSeconds(absl::Now() - killed));
  std::this_thread::sleep_for(std::chrono::seconds(5));
  writing = false;
  writer.join();
  std::printf("%zu writes acknowledged, %d refused during the failover\n", acknowledged.size(),
              refused);
  CHECK(acknowledged.size() >= 10);
  ShellResult keys = c.Mcli("admin list-api-keys");
  REQUIRE(keys.exit_code == 0);
  for (const auto& user : acknowledged) {
    INFO(user);
    CHECK(absl::StrContains(keys.output, user + " "));
  }
  RequireStillTraining(c, name);

  CheckCostNothing(c, name);
}

TEST_CASE("A stop and a start lost on the wire are repaired and cost a 2-node run nothing",
          "[e2e]") {
  // What is measured is the repair of lost control messages. The stall the cut links cause
  // makes one node's step times look like a straggler's, and the sweep that follows measures
  // compute on two simulated nodes sharing this machine's cores with the training itself: a
  // verdict that can condemn a healthy node on a loaded machine (issue 47's subject, not this
  // test's). Straggler sweeps are kept out of it.
  LocalCluster c({"--straggler-factor", "100"});
  // Each worker reaches the scheduler through a link the test can cut: while cut, nothing
  // crosses; when restored, the connections are dropped with whatever was in flight.
  TcpProxy link_a(c.server.grpc_port), link_b(c.server.grpc_port);
  const std::string shared = c.marks_dir() + "/shared";
  StartTrainingWorker(c, "node-a", shared, absl::StrCat("127.0.0.1:", link_a.port()));
  StartTrainingWorker(c, "node-b", shared, absl::StrCat("127.0.0.1:", link_b.port()));
  auto cut = [&] {
    link_a.Cut();
    link_b.Cut();
  };
  auto restore = [&] {
    // Long enough for the command to be written into the cut link, well under a lease (2.8 s).
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    link_a.Restore();
    link_b.Restore();
  };

  // 1. A stop lost: the old run's ranks must end before anything else gets their GPUs.
  const v1::Run old = c.Submit("old", "echo $$ > \"$MARKS/old-$RANK\"; exec sleep 600", 4, 2);
  c.client->WaitForStatus(old.name(), v1::RUN_STATUS_RUNNING);
  std::vector<pid_t> old_ranks;
  for (int rank = 0; rank < 4; ++rank) old_ranks.push_back(c.PidMark(absl::StrCat("old-", rank)));
  cut();
  REQUIRE(c.Mcli("stop run " + old.name()).exit_code == 0);
  REQUIRE(c.server.process.WaitForLine("stopping run " + old.name(), absl::Seconds(5)).ok());
  restore();
  c.client->WaitForStatus(old.name(), v1::RUN_STATUS_STOPPED, absl::Seconds(30));
  CHECK(c.server.process.WaitForLine("its stop is sent again", absl::Seconds(1)).ok());
  for (pid_t pid : old_ranks) CHECK_FALSE(GroupAlive(pid));

  // 2. A start lost: the training run starts all the same, in its first attempt.
  cut();
  const std::string name = SubmitTraining(c, "disturbed.yaml");
  REQUIRE(c.server.process.WaitForLine("placed run " + name, absl::Seconds(5)).ok());
  restore();
  const v1::Run started = WaitForStep(c, name, 20);
  CHECK(started.resumption_index() == 0);
  CHECK(c.server.process.WaitForLine("sending it again", absl::Seconds(1)).ok());

  CheckCostNothing(c, name);
}

TEST_CASE(
    "The wall clocks of the workers stepped an hour apart, then swapped, cost a 2-node run "
    "nothing",
    "[e2e]") {
  // libfaketime (Debian's) offsets a worker's wall clock by what its file says, read at every
  // call; the monotonic clock stays true, as when an operator or NTP steps a node's clock. Its
  // ranks do not inherit it (the worker passes them a few variables only).
  const std::string preload = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
  REQUIRE(std::filesystem::exists(preload));
  // As in the lost-on-the-wire case: a step that lags while the clocks jump can start a straggler
  // sweep, whose compute measurement of two simulated nodes sharing this machine's cores with the
  // training once condemned node-a at 0.43 x the median (issue 47's subject, not this test's).
  LocalCluster c({"--straggler-factor", "100"});
  const std::string shared = c.marks_dir() + "/shared";
  std::map<std::string, std::string> offset_file;
  auto step = [&](const std::string& node, const std::string& relative) {
    std::ofstream(offset_file.at(node)) << relative << "\n";
  };
  for (const std::string node : {"node-a", "node-b"}) {
    offset_file[node] = c.marks_dir() + "/clock-offset-" + node;
    step(node, "+0");
    StartTrainingWorker(c, node, shared, "",
                        {"LD_PRELOAD=" + preload, "FAKETIME_TIMESTAMP_FILE=" + offset_file[node],
                         "FAKETIME_CACHE_DURATION=1", "DONT_FAKE_MONOTONIC=1"});
  }
  const std::string name = SubmitTraining(c, "disturbed.yaml");
  const v1::Run before = WaitForStep(c, name, 20);

  // node-a an hour ahead, node-b half an hour behind; then the other way round.
  step("node-a", "+3600");
  step("node-b", "-1800");
  // A few seconds of training under each pair of clocks: heartbeats, reports and lines go on.
  const int under_each = Baseline().StepsIn(absl::Seconds(5));
  const v1::Run first = WaitForStep(c, name, before.progress().step() + under_each);
  CHECK(first.resumption_index() == 0);
  step("node-a", "-1800");
  step("node-b", "+3600");
  const v1::Run second = WaitForStep(c, name, first.progress().step() + under_each);
  CHECK(second.resumption_index() == 0);
  // The steps took: rank 0's worker stamped its lines with its stepped clock.
  bool stamped_off = false;
  for (const auto& line : c.Logs(name, 0)) {
    stamped_off |= absl::AbsDuration(FromProtoTime(line.time()) - absl::Now()) > absl::Minutes(20);
  }
  CHECK(stamped_off);
  step("node-a", "+0");
  step("node-b", "+0");

  CheckCostNothing(c, name);
}

// Whether the server's scheduler leads now; false when it does not answer within 2 s.
bool Leads(const ServerProcess& s, const std::string& key) {
  Client client(s.endpoint(), key);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + key);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::SchedulerStatusResponse resp;
  return client.scheduler->GetStatus(&ctx, v1::SchedulerStatusRequest(), &resp).ok() &&
         resp.leader();
}

// The first of `servers` whose scheduler leads within `timeout`, or null.
ServerProcess* AwaitLeader(const std::vector<ServerProcess*>& servers, const std::string& key,
                           absl::Duration timeout) {
  for (const absl::Time end = absl::Now() + timeout; absl::Now() < end;) {
    for (ServerProcess* s : servers) {
      if (Leads(*s, key)) return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return nullptr;
}

TEST_CASE(
    "The scheduler leader killed, then its successor frozen for 20 s, cost a 2-node run "
    "nothing, and the frozen leader never acts again",
    "[e2e]") {
  // A lease long enough to find a new leader in: with standbys, workers leave a leader that
  // stopped renewing after half a lease, and a frozen leader's database session ends after 5 s.
  const std::vector<std::string> flags = {"--lease-seconds", "15"};
  LocalCluster c(flags);
  ServerProcess b = StartServer("tessera-server", c.pg->url(), flags);
  ServerProcess d = StartServer("tessera-server", c.pg->url(), flags);
  REQUIRE(AwaitLeader({&c.server}, c.admin_key, absl::Seconds(10)) == &c.server);
  CHECK_FALSE(Leads(b, c.admin_key));
  CHECK_FALSE(Leads(d, c.admin_key));
  // Workers know every instance and find the leader among them.
  const std::string all = absl::StrCat(c.server.endpoint(), ",", b.endpoint(), ",", d.endpoint());
  const std::string shared = c.marks_dir() + "/shared";
  StartTrainingWorker(c, "node-a", shared, all);
  StartTrainingWorker(c, "node-b", shared, all);

  const std::string name = SubmitTraining(c, "disturbed.yaml");
  const v1::Run before = WaitForStep(c, name, 20);

  // 1. The leader dies: a standby takes over at once (the database ends the dead session).
  REQUIRE(c.server.process.Kill(SIGKILL).ok());
  const absl::Time killed = absl::Now();
  ServerProcess* next = AwaitLeader({&b, &d}, c.admin_key, absl::Seconds(10));
  REQUIRE(next != nullptr);
  std::printf("a new scheduler leader after %.1f s\n", absl::ToDoubleSeconds(absl::Now() - killed));
  ServerProcess* other = next == &b ? &d : &b;
  // The tests' calls go to the instance that stays up from here on.
  c.client = std::make_unique<Client>(other->endpoint(), c.admin_key);
  c.api_endpoint = other->endpoint();
  const v1::Run after_kill =
      WaitForStep(c, name, before.progress().step() + Baseline().StepsIn(absl::Seconds(3)));
  CHECK(after_kill.resumption_index() == 0);

  // 2. The new leader freezes for 20 s. The last standby leads once the frozen one's database
  // session ends, and the workers move to it before their leases end.
  REQUIRE(::kill(next->process.pid(), SIGSTOP) == 0);
  const absl::Time frozen = absl::Now();
  ServerProcess* third = AwaitLeader({other}, c.admin_key, absl::Seconds(15));
  CHECK(third == other);
  std::printf("the last standby leads %.1f s into the freeze\n",
              absl::ToDoubleSeconds(absl::Now() - frozen));
  std::this_thread::sleep_for(absl::ToChronoNanoseconds(frozen + absl::Seconds(20) - absl::Now()));
  CHECK(c.client->Get(name).status() == v1::RUN_STATUS_RUNNING);
  REQUIRE(::kill(next->process.pid(), SIGCONT) == 0);
  // Back, it knows at once that its term is over: it steps down and leads no more.
  CHECK(next->process.WaitForLine("steps down from the scheduler role", absl::Seconds(10)).ok());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CHECK_FALSE(Leads(*next, c.admin_key));
  CHECK(Leads(*other, c.admin_key));

  // The frozen leader's leases all ran out while it was stopped: had it acted after resuming,
  // it would have declared both nodes LOST (CheckCostNothing looks).
  CheckCostNothing(c, name);
}

}  // namespace control_plane_faults_e2e_test
}  // namespace tessera::testing
