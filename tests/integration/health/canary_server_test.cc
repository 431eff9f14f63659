// The canary server as the worker keeps it: real `tessera-canary serve` processes, asked check
// after check by CanaryServer and CanaryRunner.
#include "worker/daemon/canary_server.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/clock.h"
#include "tests/support/binaries.h"
#include "tests/support/free_port.h"
#include "tests/support/poll_until.h"
#include "tests/support/temp_dir.h"
#include "worker/canary/canary_result.h"
#include "worker/daemon/canary_runner.h"

namespace tessera::testing {
namespace canary_server_test {

// Patience for a check of a fraction of a second on a loaded machine: a guard against a hang.
constexpr absl::Duration kPatience = absl::Seconds(120);

v1::HealthCheckResult Parsed(const absl::StatusOr<std::string>& answer) {
  REQUIRE(answer.ok());
  auto parsed = canary::ResultFromJsonLine(*answer);
  REQUIRE(parsed.ok());
  return *parsed;
}

bool GroupGone(pid_t group) { return ::kill(-group, 0) != 0 && errno == ESRCH; }

v1::StartCanary ComputeCheck(double seconds, int64_t timeout_seconds) {
  v1::StartCanary c;
  c.set_sweep_id("s1");
  c.set_kind(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  c.set_seconds(seconds);
  c.set_threads(1);
  c.mutable_timeout()->set_seconds(timeout_seconds);
  return c;
}

v1::HealthCheckResult AwaitResult(worker::CanaryRunner& runner) {
  std::vector<v1::HealthCheckResult> results;
  REQUIRE(PollUntil(
      [&] {
        results = runner.TakeResults();
        return !results.empty();
      },
      kPatience));
  REQUIRE(results.size() == 1);
  return results[0];
}

TEST_CASE("a canary server answers check after check, and a bad request without ending") {
  TempDir dir;
  auto server =
      worker::CanaryServer::Start(BinaryPath("tessera-canary"), "node-a", dir.path + "/err");
  REQUIRE(server.ok());
  const pid_t pid = (*server)->pid();
  const std::vector<std::string> compute = {"compute", "--seconds", "0.1", "--threads", "1"};
  auto first = Parsed((*server)->Ask(compute, kPatience));
  CHECK(first.verdict() == v1::HEALTH_VERDICT_PASSED);
  CHECK(first.compute_tflops() > 0);
  auto bad = Parsed((*server)->Ask({"compute", "--size", "nine"}, kPatience));
  CHECK(bad.verdict() == v1::HEALTH_VERDICT_ERROR);
  CHECK(bad.error().find("tessera-canary serve: bad request: ") == 0);
  CHECK(bad.error().find("--size") != std::string::npos);
  auto sizes = Parsed(
      (*server)->Ask({"allreduce", "--rank", "0", "--world", "1", "--sizes", "7XB"}, kPatience));
  CHECK(sizes.verdict() == v1::HEALTH_VERDICT_ERROR);
  CHECK(sizes.error().find("--sizes: ") == 0);
  auto again = Parsed((*server)->Ask(compute, kPatience));
  CHECK(again.verdict() == v1::HEALTH_VERDICT_PASSED);
  CHECK((*server)->pid() == pid);
  CHECK((*server)->answered() == 4);
  CHECK((*server)->Running());
  server->reset();
  CHECK(GroupGone(pid));
}

TEST_CASE("a check that outlives its timeout is answered TIMEOUT, and its server ends") {
  TempDir dir;
  auto server =
      worker::CanaryServer::Start(BinaryPath("tessera-canary"), "node-a", dir.path + "/err");
  REQUIRE(server.ok());
  // Rank 0 of two, whose partner never comes.
  auto answer = Parsed((*server)->Ask({"allreduce", "--rank", "0", "--world", "2", "--master-port",
                                       absl::StrCat(FreePort()), "--timeout", "1"},
                                      kPatience));
  CHECK(answer.verdict() == v1::HEALTH_VERDICT_TIMEOUT);
  CHECK(answer.error() == "did not finish within 1 s");
  CHECK(PollUntil([&] { return !(*server)->Running(); }, kPatience));
  const auto after = (*server)->Ask({"compute", "--seconds", "0.1"}, kPatience);
  CHECK(absl::IsUnavailable(after.status()));
}

TEST_CASE("a node's canaries share one server, which ends once idle past the limit") {
  TempDir dir;
  auto clock = std::make_shared<FakeClock>();
  worker::CanaryRunner runner(BinaryPath("tessera-canary"), "node-a", dir.path, clock,
                              absl::Seconds(30));
  REQUIRE(runner.Start(ComputeCheck(0.1, 60)).ok());
  const auto first = AwaitResult(runner);
  CHECK(first.verdict() == v1::HEALTH_VERDICT_PASSED);
  CHECK(first.node_name() == "node-a");
  CHECK(first.sweep_id() == "s1");
  REQUIRE(runner.ProcessGroups().size() == 1);
  const pid_t server = runner.ProcessGroups()[0];
  CHECK(runner.IdleServers() == 1);

  clock->Advance(absl::Seconds(29));
  REQUIRE(runner.Start(ComputeCheck(0.1, 60)).ok());
  CHECK(AwaitResult(runner).verdict() == v1::HEALTH_VERDICT_PASSED);
  CHECK(runner.ProcessGroups() == std::vector<pid_t>{server});  // the same process, reused

  clock->Advance(absl::Seconds(29));
  CHECK(runner.TakeResults().empty());
  CHECK(runner.IdleServers() == 1);  // idle for 29 s since its last check: kept
  clock->Advance(absl::Seconds(1));
  CHECK(runner.TakeResults().empty());
  CHECK(runner.IdleServers() == 0);
  CHECK(runner.ProcessGroups().empty());
  CHECK(GroupGone(server));
}

TEST_CASE("a server killed between checks is replaced, and one stopped in a check is a timeout") {
  TempDir dir;
  auto clock = std::make_shared<FakeClock>();
  worker::CanaryRunner runner(BinaryPath("tessera-canary"), "node-a", dir.path, clock);
  REQUIRE(runner.Start(ComputeCheck(0.1, 60)).ok());
  CHECK(AwaitResult(runner).verdict() == v1::HEALTH_VERDICT_PASSED);
  REQUIRE(runner.ProcessGroups().size() == 1);
  const pid_t killed = runner.ProcessGroups()[0];
  ::kill(-killed, SIGKILL);  // as an injected crash of the node's processes

  REQUIRE(runner.Start(ComputeCheck(0.1, 60)).ok());
  CHECK(AwaitResult(runner).verdict() == v1::HEALTH_VERDICT_PASSED);
  REQUIRE(runner.ProcessGroups().size() == 1);
  const pid_t replacement = runner.ProcessGroups()[0];
  CHECK(replacement != killed);

  // Stopped (a hung node): its own watchdog cannot answer, the runner's limit (timeout + 5 s)
  // does.
  REQUIRE(runner.Start(ComputeCheck(3, 1)).ok());
  REQUIRE(PollUntil([&] { return runner.IdleServers() == 0; }, kPatience));
  ::kill(-replacement, SIGSTOP);
  const auto stopped = AwaitResult(runner);
  CHECK(stopped.verdict() == v1::HEALTH_VERDICT_TIMEOUT);
  CHECK(stopped.error() == "the canary did not end within 6s");
  CHECK(runner.ProcessGroups().empty());
  CHECK(GroupGone(replacement));
}

// Answers every iptables command with success and keeps its words: what the walls asked.
struct IptablesLog final : worker::image::ToolRunner {
  absl::Mutex mu;
  std::vector<std::string> lines ABSL_GUARDED_BY(mu);
  absl::StatusOr<worker::image::ToolResult> Run(const std::vector<std::string>& argv,
                                                absl::Duration) override {
    absl::MutexLock lock(&mu);
    lines.push_back(absl::StrJoin(argv, " "));
    return worker::image::ToolResult{.exit_code = 0, .output = ""};
  }
};

TEST_CASE("an all-reduce's rendezvous port is walled from the node's ranks while it runs") {
  TempDir dir;
  IptablesLog iptables;
  worker::NetworkWallsOptions options;
  options.state_dir = dir.path;
  options.rank_uids = {"100000-4294967294"};
  auto walls = std::make_shared<worker::NetworkWalls>(std::move(options), iptables);
  REQUIRE(walls->Install({}).ok());
  worker::CanaryRunner runner(BinaryPath("tessera-canary"), "node-a", dir.path,
                              std::make_shared<FakeClock>(), absl::Seconds(30), walls);
  const int port = FreePort();
  v1::StartCanary c;
  c.set_sweep_id("s1");
  c.set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
  c.add_group("node-a");
  c.set_master_addr("127.0.0.1");
  c.set_master_port(port);
  c.set_rendezvous_token("0123456789abcdef0123456789abcdef");
  c.add_payload_bytes(1 << 20);
  c.mutable_timeout()->set_seconds(60);
  REQUIRE(runner.Start(c).ok());
  const auto result = AwaitResult(runner);
  INFO(result.error());
  CHECK(result.verdict() == v1::HEALTH_VERDICT_PASSED);

  // The rule that rejects every uid but the worker's (no rank's) on the port: inserted before
  // the check was asked, deleted after its answer.
  const std::string rule =
      absl::StrCat("-p tcp --dport ", port, " -m owner ! --uid-owner ", ::getuid(), " -j REJECT");
  absl::MutexLock lock(&iptables.mu);
  const auto& lines = iptables.lines;
  INFO(absl::StrJoin(lines, "\n"));
  auto ending = [&](const std::string& words) {
    return
        [words](const std::string& line) { return absl::EndsWith(line, "iptables -w " + words); };
  };
  const auto inserted = std::find_if(lines.begin(), lines.end(),
                                     ending(absl::StrCat("-I ", walls->chain(), " 1 ", rule)));
  REQUIRE(inserted != lines.end());
  CHECK(std::find_if(inserted, lines.end(),
                     ending(absl::StrCat("-D ", walls->chain(), " ", rule))) != lines.end());
}

TEST_CASE("behind a downed link an all-reduce reaches no peer, compute checks still run") {
  TempDir dir;
  auto clock = std::make_shared<FakeClock>();
  worker::CanaryRunner runner(BinaryPath("tessera-canary"), "node-a", dir.path, clock);
  v1::StartCanary c;
  c.set_sweep_id("s1");
  c.set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
  c.add_group("node-a");
  c.set_master_addr("127.0.0.1");
  c.set_master_port(FreePort());
  c.add_payload_bytes(1 << 20);
  c.mutable_timeout()->set_seconds(60);
  runner.SetLinkDown(absl::Seconds(10));
  REQUIRE(runner.Start(c).ok());
  // Answered at once, without a canary process.
  auto results = runner.TakeResults();
  REQUIRE(results.size() == 1);
  CHECK(results[0].verdict() == v1::HEALTH_VERDICT_ERROR);
  CHECK(results[0].error() == "no peer reachable: the node's data link is down (injected fault)");
  CHECK(results[0].group(0) == "node-a");
  CHECK(runner.ProcessGroups().empty());
  REQUIRE(runner.Start(ComputeCheck(0.2, 60)).ok());
  CHECK(AwaitResult(runner).verdict() == v1::HEALTH_VERDICT_PASSED);
  // Up again when its time is over.
  clock->Advance(absl::Seconds(11));
  c.set_master_port(FreePort());
  REQUIRE(runner.Start(c).ok());
  const auto after = AwaitResult(runner);
  INFO(after.error());
  CHECK(after.verdict() == v1::HEALTH_VERDICT_PASSED);
  // Until cleared, then cleared.
  runner.SetLinkDown(absl::InfiniteDuration());
  clock->Advance(absl::Hours(1000));
  REQUIRE(runner.Start(c).ok());
  REQUIRE(runner.TakeResults().size() == 1);
  runner.SetLinkDown(absl::ZeroDuration());
  c.set_master_port(FreePort());
  REQUIRE(runner.Start(c).ok());
  CHECK(AwaitResult(runner).verdict() == v1::HEALTH_VERDICT_PASSED);
}

}  // namespace canary_server_test
}  // namespace tessera::testing
