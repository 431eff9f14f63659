// The split deployment of docs/operator-guide.md (tessera-runs, tessera-scheduler, tessera-logs,
// tessera-gateway as separate processes) under a real 2-node tessera-train run: the run manager,
// the log service and the gateway are each killed with SIGKILL and restarted. None may cost the
// run an interruption, a step or an acknowledged log line.
#include <signal.h>

#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/e2e/training_helpers.h"
#include "tests/support/free_port.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace split_services_faults_e2e_test {

std::string Loopback(int port) { return absl::StrCat("127.0.0.1:", port); }

struct SplitPlane {
  std::unique_ptr<PostgresServer> pg;
  std::string admin_key;
  // Fixed ports, so that a restarted process is found where the others look for it.
  const std::string runs_at = Loopback(FreePort()), sched_at = Loopback(FreePort()),
                    logs_at = Loopback(FreePort()), gateway_at = Loopback(FreePort());
  ServerProcess runs, sched, logs;
  Process gateway;
  TempDir root{"tessera-split"};
  std::vector<Process> workers;

  SplitPlane() {
    auto started = PostgresServer::Start();
    REQUIRE(started.ok());
    pg = *std::move(started);
    admin_key = CreateKey(pg->url(), "ops", "admin");
    StartRuns();
    sched = StartServer("tessera-scheduler", pg->url(),
                        {"--grpc-listen", sched_at, "--runs-endpoint", runs_at});
    StartLogs();
    StartGateway();
  }
  void StartRuns() {
    runs = StartServer(
        "tessera-runs", pg->url(),
        {"--grpc-listen", runs_at, "--scheduler-endpoint", sched_at, "--logs-endpoint", logs_at});
  }
  void StartLogs() {
    logs = StartServer("tessera-logs", pg->url(),
                       {"--grpc-listen", logs_at, "--runs-endpoint", runs_at});
  }
  void StartGateway() {
    auto p = Process::Start(
        {BinaryPath("tessera-gateway"), "--listen", gateway_at, "--upstream", runs_at,
         "--logs-endpoint", logs_at, "--metrics-listen", "127.0.0.1:0", "--plaintext"},
        TempLog("tessera-gateway"));
    REQUIRE(p.ok());
    gateway = *std::move(p);
    REQUIRE(gateway.WaitForLine("forwarding to gRPC", absl::Seconds(20)).ok());
  }
  void StartWorker(const std::string& name) {
    auto key_file = NodeKeyFile(pg->url(), name, root.path);
    REQUIRE(key_file.ok());
    std::vector<std::string> argv =
        WorkerArgv(name, sched_at, *key_file, root.path + "/" + name, /*gpus=*/2);
    for (const auto& flag : TrainingRankEnv(root.path + "/shared")) argv.push_back(flag);
    argv.insert(argv.end(), {"--log-endpoint", logs_at});
    auto p = Process::Start(argv, TempLog("worker-" + name));
    REQUIRE(p.ok());
    REQUIRE(p->WaitForLine("registered node " + name, absl::Seconds(20)).ok());
    workers.push_back(*std::move(p));
  }
  ShellResult Mcli(const std::string& args) {
    return RunShell(absl::StrCat("TESSERA_CONFIG=/nonexistent TESSERA_ENDPOINT=", runs_at,
                                 " TESSERA_API_KEY=", admin_key, " ", BinaryPath("mcli"), " ",
                                 args));
  }
  std::string SubmitTraining(const std::string& file) {
    ShellResult submitted = Mcli("run -f " + ExampleIn(root.path, Baseline().steps, file));
    INFO(submitted.output);
    REQUIRE(submitted.exit_code == 0);
    return std::string(absl::StripAsciiWhitespace(submitted.output));
  }
  // Rank 0's stored losses, once the last step's line is stored.
  std::map<int, double> Losses(const std::string& name) {
    auto stub =
        v1::LogService::NewStub(grpc::CreateChannel(logs_at, grpc::InsecureChannelCredentials()));
    const std::string last =
        absl::StrCat("step ", Baseline().steps, "/", Baseline().steps, ": loss");
    std::string text;
    for (int i = 0; i < 600 && !absl::StrContains(text, last); ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      text.clear();
      v1::GetLogsRequest req;
      req.set_run_name(name);
      req.set_rank(0);
      Client client(logs_at, admin_key);
      auto ctx = client.Ctx();  // outlives the reader
      auto reader = stub->GetLogs(ctx.get(), req);
      v1::LogLine line;
      while (reader->Read(&line)) text += line.text();
      (void)reader->Finish();
    }
    REQUIRE(absl::StrContains(text, last));
    return LossesIn(text);
  }
};

TEST_CASE(
    "The run manager, the log service and the gateway, each killed with SIGKILL and restarted, "
    "cost a 2-node run nothing",
    "[e2e]") {
  SplitPlane p;
  p.StartWorker("node-a");
  p.StartWorker("node-b");
  Client client(p.runs_at, p.admin_key);
  const std::string name = p.SubmitTraining("disturbed.yaml");
  v1::Run run = WaitForStep(client, name, 20);

  // 1. The run manager: the scheduler's attempt and progress reports wait for it.
  REQUIRE(p.runs.process.Kill(SIGKILL).ok());
  std::this_thread::sleep_for(std::chrono::seconds(5));
  p.StartRuns();
  run = WaitForStep(client, name, run.progress().step() + Baseline().StepsIn(absl::Seconds(3)));
  CHECK(run.resumption_index() == 0);

  // 2. The log service: the workers keep every unacknowledged line and send it again.
  REQUIRE(p.logs.process.Kill(SIGKILL).ok());
  std::this_thread::sleep_for(std::chrono::seconds(5));
  p.StartLogs();
  run = WaitForStep(client, name, run.progress().step() + Baseline().StepsIn(absl::Seconds(3)));
  CHECK(run.resumption_index() == 0);

  // 3. The gateway: REST answers again once it is back.
  REQUIRE(p.gateway.Kill(SIGKILL).ok());
  p.StartGateway();
  ShellResult rest = RunShell(absl::StrCat("curl -sf -H 'Authorization: Bearer ", p.admin_key,
                                           "' http://", p.gateway_at, "/api/v1/runs/", name));
  INFO(rest.output);
  CHECK(rest.exit_code == 0);
  CHECK(absl::StrContains(rest.output, name));

  const v1::Run done = WaitForCompletion(client, name, Baseline().steps);
  CHECK(done.resumption_index() == 0);
  CHECK(done.retries_used() == 0);
  CHECK(done.control_plane_interruptions() == 0);
  CHECK(done.progress().step() == Baseline().steps);
  CheckLossesEqualBaseline(p.Losses(name), Baseline());
}

}  // namespace split_services_faults_e2e_test
}  // namespace tessera::testing
