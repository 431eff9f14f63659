// tessera-worker end to end: real tessera-server, PostgreSQL and worker processes; ranks are
// shell commands that leave markers (pids, start times) for the test to check.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/local_cluster.h"
#include "tests/support/poll_until.h"
#include "tests/support/tcp_proxy.h"

namespace tessera::testing {
namespace worker_test {

// Polls until no process of the group is alive; returns when that was seen (unix nanos).
std::optional<int64_t> WaitForGroupDeath(pid_t pgid, absl::Duration timeout) {
  if (!PollUntil([pgid] { return !GroupAlive(pgid); }, timeout)) return std::nullopt;
  return NowNanos();
}

// The run's stored lines for `rank` once at least `want` have arrived (a test whose log service
// is away at the end gets them when it is back).
std::vector<v1::LogLine> WaitForLogs(LocalCluster& c, const std::string& run, int rank, size_t want,
                                     const std::string& endpoint = "") {
  std::vector<v1::LogLine> lines;
  PollUntil(
      [&] {
        lines = c.Logs(run, rank, endpoint);
        return lines.size() >= want;
      },
      absl::Seconds(15), absl::Milliseconds(50));
  return lines;
}

// The old attempt's group died before attempt 1 started elsewhere (its start mark holds the
// time its first rank began). Prints the margin as a figure.
void CheckDeadBeforeReplacement(LocalCluster& c, pid_t old_group, const std::string& what) {
  auto died = WaitForGroupDeath(old_group, absl::Seconds(10));
  REQUIRE(died.has_value());
  auto started = c.WaitForMark("start-1");
  REQUIRE(started.has_value());
  int64_t replacement_start = 0;
  REQUIRE(absl::SimpleAtoi(*started, &replacement_start));
  INFO("old ranks dead " << (replacement_start - *died) / 1000000 << " ms before the replacement");
  std::cout << "figure: " << what << ": old ranks dead " << (replacement_start - *died) / 1000000
            << " ms before the replacement started\n";
  CHECK(*died < replacement_start);
}

std::map<std::string, std::string> EnvOf(const std::string& spool) {
  std::map<std::string, std::string> env;
  for (absl::string_view line : absl::StrSplit(spool, '\n')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (!kv.first.empty() && line.find('=') != absl::string_view::npos) env[kv.first] = kv.second;
  }
  return env;
}

// A rank that marks when it started (ns) and its process group, then sleeps until killed: the
// runs whose old ranks must be dead before the next attempt's start.
constexpr char kMarkedSleeper[] =
    "date +%s%N > \"$MARKS/start-$RESUMPTION_INDEX\"; echo $$ > "
    "\"$MARKS/pid-$RESUMPTION_INDEX\"; sleep 300 & wait";

TEST_CASE("a 2-node x 2-rank run gets every variable, a parameters file and its own folder",
          "[worker]") {
  LocalCluster c;
  c.StartWorker("node-a");
  c.StartWorker("node-b");
  const std::string command =
      "env | grep -E '^(RUN_NAME|RUN_ID|WORLD_SIZE|RANK|LOCAL_RANK|LOCAL_WORLD_SIZE|NODE_RANK|"
      "NUM_NODES|MASTER_ADDR|MASTER_PORT|RESUMPTION_INDEX|PARAMETERS|CUDA_VISIBLE_DEVICES)='; "
      "echo \"PWD=$(pwd)\"; echo \"PARAMS=$(cat \"$PARAMETERS\")\"; "
      "i=0; while [ $i -lt 300 ]; do echo \"line $i\"; i=$((i+1)); done; echo oops >&2";
  v1::Run run = c.Submit("env-print", command, 4, 2);
  v1::Run done = c.client->WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED);
  REQUIRE(done.nodes_size() == 2);
  std::map<int, std::string> node_of_rank;
  for (const auto& n : done.nodes()) {
    node_of_rank[n.node_rank() * 2] = n.node_name();
    node_of_rank[n.node_rank() * 2 + 1] = n.node_name();
  }
  std::string master_port;
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    const std::string out = c.SpoolOf(node_of_rank[rank], run.id(), 0, rank);
    auto env = EnvOf(out);
    CHECK(env["RUN_NAME"] == run.name());
    CHECK(env["RUN_ID"] == run.id());
    CHECK(env["WORLD_SIZE"] == "4");
    CHECK(env["RANK"] == std::to_string(rank));
    CHECK(env["LOCAL_RANK"] == std::to_string(rank % 2));
    CHECK(env["LOCAL_WORLD_SIZE"] == "2");
    CHECK(env["NODE_RANK"] == std::to_string(rank / 2));
    CHECK(env["NUM_NODES"] == "2");
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    CHECK(!env["MASTER_PORT"].empty());
    if (master_port.empty()) master_port = env["MASTER_PORT"];
    CHECK(env["MASTER_PORT"] == master_port);
    CHECK(env["RESUMPTION_INDEX"] == "0");
    CHECK(env["CUDA_VISIBLE_DEVICES"] == std::to_string(rank % 2));
    CHECK(env["PARAMS"] == "{}");
    CHECK(absl::StrContains(env["PARAMETERS"], run.id() + "/attempt-0/parameters.json"));
    CHECK(absl::StrContains(env["PWD"], run.id() + "/attempt-0/work"));
    // Every line, in order.
    std::vector<std::string> counted;
    for (absl::string_view line : absl::StrSplit(out, '\n')) {
      if (absl::StartsWith(line, "line ")) counted.emplace_back(line);
    }
    REQUIRE(counted.size() == 300);
    for (int i = 0; i < 300; ++i) CHECK(counted[i] == absl::StrCat("line ", i));
    CHECK(c.SpoolOf(node_of_rank[rank], run.id(), 0, rank, "stderr") == "oops\n");

    // The same lines reached the log service, each once, in order, with their metadata.
    std::vector<std::string> shipped;
    bool saw_stderr = false;
    for (const auto& l : WaitForLogs(c, run.name(), rank, 13 + 2 + 300 + 1)) {
      CHECK(l.rank() == rank);
      CHECK(l.node_rank() == rank / 2);
      CHECK(l.node_name() == node_of_rank[rank]);
      CHECK(l.resumption_index() == 0);
      if (l.stream() == v1::LOG_STREAM_STDERR) {
        saw_stderr = l.text() == "oops";
        continue;
      }
      if (absl::StartsWith(l.text(), "line ")) shipped.push_back(l.text());
    }
    CHECK(shipped == counted);
    CHECK(saw_stderr);
  }
}

TEST_CASE("kill -9 of a worker: its node is lost within the lease, the run resumes elsewhere",
          "[worker]") {
  LocalCluster c;
  c.StartWorker("node-a");
  c.StartWorker("node-b");
  c.StartWorker("node-c");
  // Attempt 0 runs until its node dies; the resumed attempt finishes at once.
  const std::string command =
      "echo $$ > \"$MARKS/pid-$RESUMPTION_INDEX-$RANK\"; "
      "if [ \"$RESUMPTION_INDEX\" = 0 ]; then sleep 300 & wait; fi; echo \"done $RANK\"";
  v1::Run run = c.Submit("survivor", command, 4, 2, /*retry=*/true);
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  std::vector<pid_t> attempt0;
  for (int rank = 0; rank < 4; ++rank) attempt0.push_back(c.PidMark(absl::StrCat("pid-0-", rank)));
  const std::string victim = c.client->Get(run.name()).nodes(0).node_name();

  REQUIRE(c.worker(victim).process->Kill(SIGKILL).ok());
  const absl::Duration lost_after = c.WaitForLiveness(victim, v1::NODE_LIVENESS_LOST);
  INFO("node lost after " << absl::FormatDuration(lost_after));
  std::cout << "figure: node lost " << absl::FormatDuration(lost_after) << " after kill -9\n";
  // The lease is 2.8 s from the last heartbeat (sent at most 0.5 s before the kill), and the
  // scheduler's cycle runs at its end.
  CHECK(lost_after < absl::Milliseconds(3500));  // slack for a loaded machine

  v1::Run done = c.client->WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(30));
  CHECK(done.resumption_index() == 1);
  for (const auto& n : done.nodes()) CHECK(n.node_name() != victim);
  // The dead worker's ranks did not outlive it: its fence watchdog killed them.
  for (pid_t pid : attempt0) CHECK_FALSE(GroupAlive(pid));

  v1::RunDescription d = c.client->Describe(run.name());
  REQUIRE(d.attempts_size() == 2);
  CHECK(d.attempts(0).end_reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK(d.attempts(0).detection_method() == v1::DETECTION_METHOD_LEASE_EXPIRY);
  CHECK(absl::StrContains(d.attempts(0).reason(), victim));
  CHECK(d.attempts(1).end_reason() == v1::ATTEMPT_END_REASON_SUCCEEDED);
  // And mcli shows it to a person (with no config file of the machine's user: the cluster's).
  auto shown = c.Mcli("describe run " + run.name());
  INFO(shown.output);
  CHECK(shown.exit_code == 0);
  CHECK(absl::StrContains(shown.output, "NODE_FAILURE"));
  CHECK(absl::StrContains(shown.output, victim));
}

TEST_CASE("a node failing its pre-flight checks is cordoned with them, the run starts elsewhere",
          "[worker]") {
  LocalCluster c;
  const std::string script = c.marks_dir() + "/ib-check.sh";
  std::ofstream(script) << "#!/bin/sh\necho \"ib0: link down on $TESSERA_NODE_NAME\"\nexit 3\n";
  std::filesystem::permissions(script, std::filesystem::perms(0755));
  c.StartWorker("node-a", 2, {"--preflight-check", script});
  v1::Run run = c.Submit("preflight", "echo \"ran on $NODE_RANK\"", 2, 1, /*retry=*/false);

  // The only node fails its checks: it is cordoned, and the run waits without using a retry.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline &&
         c.Node("node-a").admin_state() != v1::NODE_ADMIN_STATE_CORDONED) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const v1::Node a = c.Node("node-a");
  REQUIRE(a.admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  CHECK(a.status_reason() ==
        "preflight: failed its pre-flight checks before a run could start: "
        "script:ib-check.sh: " +
            script + " exited with 3: ib0: link down on node-a");
  v1::Run waiting = c.client->WaitForStatus(run.name(), v1::RUN_STATUS_QUEUED);
  CHECK(waiting.retries_used() == 0);
  CHECK(waiting.preflight_failures() == 1);

  // The cordon's event keeps every check the worker ran.
  v1::ListNodeEventsRequest list;
  list.mutable_filter()->add_node_names("node-a");
  list.mutable_filter()->add_types(v1::NODE_EVENT_TYPE_CORDONED);
  v1::ListNodeEventsResponse events;
  REQUIRE(c.client->cordon->ListNodeEvents(c.client->Ctx().get(), list, &events).ok());
  REQUIRE(events.events_size() == 1);
  const auto& e = events.events(0).evidence().fields();
  CHECK(absl::StartsWith(e.at("check gpus").string_value(), "passed in "));
  CHECK(absl::StrContains(e.at("check gpus").string_value(), "2 of 2 GPUs present"));
  CHECK(absl::StartsWith(e.at("check shm").string_value(), "passed in "));
  CHECK(absl::StartsWith(e.at("check script:ib-check.sh").string_value(), "FAILED in "));
  CHECK(e.at("run_name").string_value() == run.name());

  // A healthy node arrives: the run starts there and completes.
  c.StartWorker("node-b");
  v1::Run done = c.client->WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(30));
  REQUIRE(done.nodes_size() == 1);
  CHECK(done.nodes(0).node_name() == "node-b");
  CHECK(done.retries_used() == 0);
  v1::RunDescription d = c.client->Describe(run.name());
  REQUIRE(d.attempts_size() == 2);
  CHECK(d.attempts(0).end_reason() == v1::ATTEMPT_END_REASON_PREFLIGHT_FAILED);
  CHECK(d.attempts(0).detection_method() == v1::DETECTION_METHOD_PREFLIGHT);
  auto shown = c.Mcli("describe run " + run.name());
  INFO(shown.output);
  CHECK(absl::StrContains(shown.output, "node-a failed its pre-flight checks"));
}

TEST_CASE("a frozen worker is fenced: its ranks are dead before the replacement starts",
          "[worker]") {
  LocalCluster c;
  c.StartWorker("node-a");
  c.StartWorker("node-b");
  v1::Run run = c.Submit("fenced", kMarkedSleeper, 2, 1, /*retry=*/true);
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  const pid_t old_group = c.PidMark("pid-0");
  const std::string frozen = c.client->Get(run.name()).nodes(0).node_name();

  // SIGSTOP freezes the worker: no heartbeat, no fencing thread; only the separate watchdog
  // can still act.
  REQUIRE(::kill(c.worker(frozen).process->pid(), SIGSTOP) == 0);
  CheckDeadBeforeReplacement(c, old_group, "SIGSTOP");
  CHECK(c.client->Get(run.name()).nodes(0).node_name() != frozen);

  // Thawed, the worker registers again and the node comes back.
  REQUIRE(::kill(c.worker(frozen).process->pid(), SIGCONT) == 0);
  c.WaitForLiveness(frozen, v1::NODE_LIVENESS_ONLINE);
}

TEST_CASE("stop: ranks get SIGTERM, and whatever ignores it is killed at the grace period",
          "[worker]") {
  LocalCluster c({"--stop-grace-seconds", "2"});
  c.StartWorker("node-a");
  // Rank 0 ignores SIGTERM (and so does its sleep, which inherits that); rank 1 does not.
  const std::string command =
      "if [ \"$RANK\" = 0 ]; then trap '' TERM; fi; echo $$ > \"$MARKS/pid-$RANK\"; "
      "sleep 300 & wait; sleep 300";
  v1::Run run = c.Submit("stoppable", command, 2, 1);
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  const pid_t stubborn = c.PidMark("pid-0");
  const pid_t polite = c.PidMark("pid-1");

  const int64_t asked = NowNanos();
  v1::StopRunRequest req;
  req.set_name(run.name());
  v1::StopRunResponse resp;
  REQUIRE(c.client->runs->StopRun(c.client->Ctx().get(), req, &resp).ok());
  auto polite_dead = WaitForGroupDeath(polite, absl::Seconds(5));
  auto stubborn_dead = WaitForGroupDeath(stubborn, absl::Seconds(5));
  REQUIRE(polite_dead.has_value());
  REQUIRE(stubborn_dead.has_value());
  const double polite_s = (*polite_dead - asked) / 1e9, stubborn_s = (*stubborn_dead - asked) / 1e9;
  INFO("polite rank gone after " << polite_s << " s, stubborn after " << stubborn_s << " s");
  std::cout << "figure: stop: polite rank gone after " << polite_s << " s, stubborn after "
            << stubborn_s << " s (grace 2 s)\n";
  CHECK(polite_s < 1.0);
  CHECK(stubborn_s >= 1.9);  // the grace period was granted
  CHECK(stubborn_s < 3.0);   // and not exceeded by much
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_STOPPED);
}

TEST_CASE("a restarted worker kills what its previous incarnation started, the run resumes",
          "[worker]") {
  LocalCluster c;
  c.StartWorker("node-a");
  const std::string command =
      "echo $$ > \"$MARKS/pid-$RESUMPTION_INDEX\"; "
      "if [ \"$RESUMPTION_INDEX\" = 0 ]; then sleep 300 & wait; fi; echo resumed";
  v1::Run run = c.Submit("restarted", command, 2, 1, /*retry=*/true);
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  const pid_t old_group = c.PidMark("pid-0");
  // Kill the worker and its watchdog, as a crash of the whole service would.
  auto& w = c.worker("node-a");
  std::ifstream watchdog_file(w.state_dir + "/watchdog.pid");
  pid_t watchdog = 0;
  watchdog_file >> watchdog;
  REQUIRE(watchdog > 0);
  REQUIRE(w.process->Kill(SIGKILL).ok());
  ::kill(watchdog, SIGKILL);
  REQUIRE(GroupAlive(old_group));  // orphaned, for now

  const absl::Time restarted = absl::Now();
  c.StartWorker("node-a");
  auto died = WaitForGroupDeath(old_group, absl::Seconds(5));
  REQUIRE(died.has_value());
  // Well before the old lease could have ended: the new incarnation did it.
  CHECK(absl::FromUnixNanos(*died) - restarted < absl::Seconds(2));

  v1::Run done = c.client->WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(30));
  CHECK(done.resumption_index() == 1);
  v1::RunDescription d = c.client->Describe(run.name());
  REQUIRE(d.attempts_size() == 2);
  CHECK(d.attempts(0).end_reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK(absl::StrContains(d.attempts(0).reason(), "restarted"));
}

TEST_CASE("a failing rank fails the run with its exit code, and the other ranks are stopped",
          "[worker]") {
  LocalCluster c({"--stop-grace-seconds", "1"});
  c.StartWorker("node-a");
  c.StartWorker("node-b");
  const std::string command =
      "echo $$ > \"$MARKS/pid-$RANK\"; if [ \"$RANK\" = 2 ]; then sleep 0.5; exit 7; fi; "
      "sleep 300 & wait";
  v1::Run run = c.Submit("failing", command, 4, 2);
  v1::Run failed = c.client->WaitForStatus(run.name(), v1::RUN_STATUS_FAILED);
  for (int rank : {0, 1, 3}) {
    CHECK(WaitForGroupDeath(c.PidMark(absl::StrCat("pid-", rank)), absl::Seconds(5)).has_value());
  }
  v1::RunDescription d = c.client->Describe(run.name());
  REQUIRE(d.attempts_size() == 1);
  CHECK(d.attempts(0).end_reason() == v1::ATTEMPT_END_REASON_USER_EXIT);
  bool found = false;
  for (const auto& e : d.attempts(0).rank_exits())
    found = found || (e.rank() == 2 && e.exit_code() == 7);
  CHECK(found);
  CHECK(absl::StrContains(failed.status_reason() + d.attempts(0).reason(), "7"));
}

}  // namespace worker_test
}  // namespace tessera::testing

namespace tessera::testing {
namespace worker_test {

TEST_CASE("a run seen to end has its logs complete: its ranks' last lines are stored before",
          "[worker]") {
  LocalCluster c;
  c.StartWorker("node-a", 2);
  // A burst at the very end, as a crash's traceback or a final report comes.
  const int burst = 20000;
  v1::Run run =
      c.Submit("last-words", absl::StrCat("seq 1 ", burst, "; echo \"bye $RANK\" >&2"), 2, 1);
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
  // Read once, at once: nothing is still on its way.
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    const auto lines = c.Logs(run.name(), rank);
    REQUIRE(lines.size() == static_cast<size_t>(burst + 1));
    int stdout_lines = 0;
    for (const auto& l : lines) {
      if (l.stream() == v1::LOG_STREAM_STDERR) {
        CHECK(l.text() == absl::StrCat("bye ", rank));
      } else {
        CHECK(l.text() == std::to_string(++stdout_lines));
      }
    }
    CHECK(stdout_lines == burst);
  }
}

TEST_CASE("a log service killed and restarted during a run loses no line and stores none twice",
          "[worker]") {
  LocalCluster c;
  // The log service as its own process, so it can die alone.
  ServerProcess logs =
      StartServer("tessera-logs", c.pg->url(), {"--runs-endpoint", c.server.endpoint()});
  const std::string logs_endpoint = logs.endpoint();
  c.StartWorker("node-a", 2, {"--log-endpoint", logs_endpoint});
  // About 4 s of steady output from each of two ranks.
  const std::string command =
      "i=0; while [ $i -lt 4000 ]; do echo \"r$RANK line $i\"; i=$((i+1)); "
      "if [ $((i % 100)) = 0 ]; then sleep 0.1; fi; done";
  v1::Run run = c.Submit("chatty", command, 2, 1);
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  REQUIRE(logs.process.Kill(SIGKILL).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // printing goes on meanwhile
  logs = StartServer("tessera-logs", c.pg->url(),
                     {"--runs-endpoint", c.server.endpoint(), "--grpc-listen", logs_endpoint});
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(30));
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    auto lines = WaitForLogs(c, run.name(), rank, 4000, logs_endpoint);
    REQUIRE(lines.size() == 4000);  // none lost, none twice
    for (int i = 0; i < 4000; ++i) {
      CHECK(lines[i].sequence() == i);
      CHECK(lines[i].text() == absl::StrCat("r", rank, " line ", i));
    }
  }
}

}  // namespace worker_test
}  // namespace tessera::testing

namespace tessera::testing {
namespace worker_test {

TEST_CASE("a worker cut off from the network kills its ranks before the replacement starts",
          "[worker]") {
  LocalCluster c;
  TcpProxy link(c.server.grpc_port);
  const std::string via = absl::StrCat("127.0.0.1:", link.port());
  // Only the worker's own fencing thread: the watchdog process is left out, so this checks the
  // in-process path that acts when the network, not the worker, fails.
  c.StartWorker("node-a", 2, {"--no-fence-watchdog", "--log-endpoint", via}, via);
  v1::Run run = c.Submit("partitioned", kMarkedSleeper, 2, 1, /*retry=*/true);
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  REQUIRE(c.client->Get(run.name()).nodes(0).node_name() == "node-a");
  const pid_t old_group = c.PidMark("pid-0");
  c.StartWorker("node-b");

  link.Cut();
  CheckDeadBeforeReplacement(c, old_group, "network cut");
  CHECK(c.client->Get(run.name()).nodes(0).node_name() == "node-b");
  // The worker is alive all along; once the network is back it registers again.
  CHECK(c.worker("node-a").process->Running());
  link.Restore();
  c.WaitForLiveness("node-a", v1::NODE_LIVENESS_ONLINE, absl::Seconds(20));
  CHECK(absl::StrContains(c.worker("node-a").process->Log(), "fenced node node-a"));
}

TEST_CASE("a loss lease shorter than the fence: the run moves at once, the node returns fenced",
          "[worker]") {
  // A fence lease long enough for a standby scheduler's takeover, and a short loss lease.
  constexpr int kFenceSeconds = 12;
  LocalCluster c({"--lease-seconds", std::to_string(kFenceSeconds), "--loss-seconds", "2"});
  TcpProxy link(c.server.grpc_port);
  const std::string via = absl::StrCat("127.0.0.1:", link.port());
  c.StartWorker("node-a", 2, {"--log-endpoint", via}, via);
  v1::Run run = c.Submit("loss-lease", kMarkedSleeper, 2, 1, /*retry=*/true);
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  REQUIRE(c.client->Get(run.name()).nodes(0).node_name() == "node-a");
  const pid_t old_group = c.PidMark("pid-0");
  c.StartWorker("node-b");

  link.Cut();
  const absl::Duration lost_after =
      c.WaitForLiveness("node-a", v1::NODE_LIVENESS_LOST, absl::Seconds(3 * kFenceSeconds));
  std::cout << "figure: partitioned node lost " << absl::FormatDuration(lost_after)
            << " after the cut (fence lease " << kFenceSeconds << " s, loss lease 2 s)\n";
  // Before its fence lease could end: the run did not wait for it.
  CHECK(lost_after < absl::Seconds(kFenceSeconds));
  REQUIRE(c.WaitForMark("start-1", absl::Seconds(3 * kFenceSeconds)).has_value());
  CHECK(c.client->Get(run.name()).nodes(0).node_name() == "node-b");

  // The partition heals while the old attempt's ranks still run there (their fence is ahead).
  const bool alive_at_heal = GroupAlive(old_group);
  CHECK(alive_at_heal);
  link.Restore();
  // The node comes back, but only once they are dead: its GPUs were never offered with them.
  c.WaitForLiveness("node-a", v1::NODE_LIVENESS_ONLINE, absl::Seconds(3 * kFenceSeconds));
  CHECK_FALSE(GroupAlive(old_group));
  const std::string log = c.worker("node-a").process->Log();
  CHECK(absl::StrContains(log, "was declared lost and still runs"));
}

}  // namespace worker_test
}  // namespace tessera::testing
