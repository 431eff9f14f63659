// mcli, the real binary, against the real tessera-server and PostgreSQL, with the worker side of
// the control stream driven by the test: what a user types, end to end.
#include <signal.h>
#include <stdlib.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/support/control_plane.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace {

using Result = ShellResult;

// Runs mcli with TESSERA_ENDPOINT/TESSERA_API_KEY set; output is stdout and stderr together.
Result Mcli(const std::string& endpoint, const std::string& key, const std::string& args) {
  return RunShell(absl::StrCat("TESSERA_CONFIG=/nonexistent TESSERA_ENDPOINT=", endpoint,
                               " TESSERA_API_KEY=", key, " ", BinaryPath("mcli"), " ", args));
}

// A file in the test binary's own temporary folder (removed when it exits).
std::string WriteFile(const std::string& name, const std::string& text) {
  static const TempDir dir("tessera-e2e");
  return dir.Write(name, text);
}

TEST_CASE("a user submits, watches, describes and stops runs with mcli", "[e2e]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  const std::string alice = CreateKey(url, "alice", "user");
  const std::string ops = CreateKey(url, "ops", "admin");
  ServerProcess server =
      StartServer("tessera-server", url,
                  {"--lease-seconds", "2", "--stop-grace-seconds", "1", "--high-priority-users",
                   "alice"});  // the YAML asks for priority high
  FakeWorker w1(server.endpoint(), NodeKey(url, "node-1"), SimulatedNode("node-1"));
  FakeWorker w2(server.endpoint(), NodeKey(url, "node-2"), SimulatedNode("node-2"));
  REQUIRE(w1.Connect().ok());
  REQUIRE(w2.Connect().ok());
  const std::string ep = server.endpoint();

  const std::string yaml = WriteFile("run.yaml", R"(name: gpt-tiny
image: host
command: python train.py
compute:
  cluster: local
  gpus: 16
scheduling:
  priority: high
  retry_on_system_failure: true
env_variables:
  WANDB_MODE: offline
parameters:
  lr: 0.0003
)");
  Result submitted = Mcli(ep, alice, "run submit -f " + yaml);
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  const std::string name(absl::StripAsciiWhitespace(submitted.output));
  CHECK(name.rfind("gpt-tiny-", 0) == 0);

  Client client(ep, alice);
  const v1::Run run = client.WaitForStatus(name, v1::RUN_STATUS_RUNNING);
  auto start = w1.WaitForStart(run.id(), 0, absl::Seconds(5));
  REQUIRE(start.has_value());
  CHECK(start->env().at("WANDB_MODE") == "offline");
  CHECK(start->parameters_json().find("\"lr\":0.0003") != std::string::npos);

  Result table = Mcli(ep, alice, "get runs");
  INFO(table.output);
  CHECK(table.exit_code == 0);
  CHECK(table.output.find(name) != std::string::npos);
  CHECK(table.output.find("RUNNING") != std::string::npos);

  Result json = Mcli(ep, alice, "get runs -o json");
  CHECK(json.output.find("\"name\": \"" + name + "\"") != std::string::npos);

  Result others = Mcli(ep, ops, "get runs --user alice");
  CHECK(others.output.find(name) != std::string::npos);

  // Another user sees nothing of it and cannot stop it.
  const std::string bob = CreateKey(url, "bob", "user");
  CHECK(Mcli(ep, bob, "get runs").output.find(name) == std::string::npos);
  Result bob_stop = Mcli(ep, bob, "stop run " + name);
  CHECK(bob_stop.exit_code == 1);
  CHECK(bob_stop.output.find("not found") != std::string::npos);

  Result stop = Mcli(ep, alice, "stop run " + name + " --reason 'wrong lr'");
  INFO(stop.output);
  CHECK(stop.exit_code == 0);
  client.WaitForStatus(name, v1::RUN_STATUS_STOPPED);
  Result describe = Mcli(ep, alice, "describe run " + name);
  INFO(describe.output);
  CHECK(describe.output.find("Run created") != std::string::npos);
  CHECK(describe.output.find("Run started") != std::string::npos);
  CHECK(describe.output.find("wrong lr") != std::string::npos);

  Result deleted = Mcli(ep, alice, "delete run " + name);
  CHECK(deleted.exit_code == 0);
  CHECK(Mcli(ep, alice, "describe run " + name).exit_code == 1);
}

TEST_CASE("operators cordon and watch nodes with mcli, mistakes get one clear line", "[e2e]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  const std::string alice = CreateKey(url, "alice", "user");
  const std::string ops = CreateKey(url, "ops", "admin");
  ServerProcess server = StartServer("tessera-server", url);
  FakeWorker w1(server.endpoint(), NodeKey(url, "node-1"), SimulatedNode("node-1"));
  REQUIRE(w1.Connect().ok());
  const std::string ep = server.endpoint();

  Result nodes = Mcli(ep, alice, "get nodes");
  CHECK(nodes.output.find("node-1") != std::string::npos);
  Result denied = Mcli(ep, alice, "cordon node-1 --reason test");
  CHECK(denied.exit_code == 1);
  CHECK(denied.output.find("admin") != std::string::npos);
  Result cordoned = Mcli(ep, ops, "cordon node-1 --reason 'xid 79'");
  INFO(cordoned.output);
  CHECK(cordoned.exit_code == 0);
  Result events = Mcli(ep, ops, "get events");
  CHECK(events.output.find("xid 79") != std::string::npos);
  Result node = Mcli(ep, ops, "describe node node-1");
  CHECK(node.output.find("CORDONED") != std::string::npos);
  // A user sees the node, and is told why its health results are not shown.
  Result as_user = Mcli(ep, alice, "describe node node-1");
  CHECK(as_user.exit_code == 0);
  CHECK(as_user.output.find("shown to operators and admins") != std::string::npos);
  CHECK(Mcli(ep, ops, "uncordon node-1").exit_code == 0);

  // Bad input: one line, a non-zero code, and nothing created.
  const std::string bad = WriteFile("bad.yaml", "name: ok\ncommand: x\ncompute:\n  gpus: -8\n");
  Result parsed = Mcli(ep, alice, "run -f " + bad);
  CHECK(parsed.exit_code == 2);
  CHECK(parsed.output.find("line 4") != std::string::npos);
  CHECK(parsed.output.find("compute.gpus") != std::string::npos);
  const std::string odd = WriteFile("odd.yaml", "name: ok\ncommand: x\ncompute:\n  gpus: 12\n");
  Result unfit = Mcli(ep, alice, "run -f " + odd);
  CHECK(unfit.exit_code != 0);
  CHECK(unfit.output.find("compute.gpus") != std::string::npos);
  Result wrong_key = Mcli(ep, "tsk_nope", "get runs");
  CHECK(wrong_key.exit_code == 1);
  CHECK(wrong_key.output.find("mcli set api-key") != std::string::npos);
  CHECK(Mcli(ep, alice, "get runs -o json").output.find("[]") != std::string::npos);
}

}  // namespace
}  // namespace tessera::testing
