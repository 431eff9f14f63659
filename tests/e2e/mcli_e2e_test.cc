// mcli, the real binary, against the real tessera-server and PostgreSQL, with the worker side of
// the control stream driven by the test: what a user types, end to end.
#include <signal.h>
#include <stdlib.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/policy/run_status.h"
#include "tests/support/control_plane.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace mcli_e2e_test {

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

// The lines of a unified diff that start with `mark` ('-' or '+') and hold `text`.
bool DiffHas(const std::string& diff, char mark, const std::string& text) {
  for (const absl::string_view line : absl::StrSplit(diff, '\n')) {
    if (!line.empty() && line.front() == mark && absl::StrContains(line, text)) return true;
  }
  return false;
}

TEST_CASE("mcli's shortcuts: submit overrides, run -r and --clone, watchdog, -m, diff, update",
          "[e2e]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  const std::string alice = CreateKey(url, "alice", "user");
  ServerProcess server =
      StartServer("tessera-server", url, {"--lease-seconds", "2", "--stop-grace-seconds", "1"});
  FakeWorker w1(server.endpoint(), NodeKey(url, "node-1"), SimulatedNode("node-1"));
  FakeWorker w2(server.endpoint(), NodeKey(url, "node-2"), SimulatedNode("node-2"));
  REQUIRE(w1.Connect().ok());
  REQUIRE(w2.Connect().ok());
  const std::string ep = server.endpoint();
  Client client(ep, alice);
  const auto submit = [&](const std::string& args) {
    Result r = Mcli(ep, alice, args);
    INFO(args << ": " << r.output);
    REQUIRE(r.exit_code == 0);
    return std::string(absl::StripAsciiWhitespace(r.output));
  };

  const std::string nlp = WriteFile("nlp.yaml", R"(name: sweep
image: host
command: python train.py
compute:
  cluster: local
  gpus: 8
metadata:
  team: nlp
  lr: "3e-4"
)");
  // Every override mcli has, on a file that asks for none of them.
  const std::string a =
      submit("run -f " + nlp +
             " --gpus 16 --nodes 2 --node-names node-1,node-2 --gpu-type sim --preemptible"
             " --max_retries 3 --max-duration 2 --priority low --image registry.example/nlp/train:2"
             " --name sweep-a");
  CHECK(a.rfind("sweep-a-", 0) == 0);
  const v1::Run run_a = client.Get(a);
  const v1::RunSpec& spec_a = run_a.spec();
  CHECK(spec_a.compute().gpus() == 16);
  CHECK(spec_a.compute().nodes() == 2);
  CHECK(spec_a.compute().node_names_size() == 2);
  CHECK(spec_a.compute().gpu_type() == "sim");
  CHECK(spec_a.image() == "registry.example/nlp/train:2");
  CHECK(spec_a.scheduling().preemptible());
  CHECK(spec_a.scheduling().max_retries() == 3);
  CHECK(spec_a.scheduling().retry_on_system_failure());
  CHECK(spec_a.scheduling().max_duration_hours() == 2);
  CHECK(spec_a.scheduling().priority() == v1::PRIORITY_LOW);
  client.WaitForStatus(a, v1::RUN_STATUS_RUNNING);

  // The watchdog, off and on again, as the run's spec and events record it.
  Result off = Mcli(ep, alice, "watchdog " + a + " --disable");
  INFO(off.output);
  CHECK(off.exit_code == 0);
  CHECK(off.output.find("Watchdog off for run " + a) != std::string::npos);
  CHECK_FALSE(client.Get(a).spec().scheduling().retry_on_system_failure());
  Result on = Mcli(ep, alice, "watchdog " + a);
  CHECK(on.output.find("retried up to 3 times") != std::string::npos);
  CHECK(client.Get(a).spec().scheduling().retry_on_system_failure());
  Result updated = Mcli(ep, alice, "update run " + a + " --max-duration 5 --max-retries 7");
  INFO(updated.output);
  CHECK(updated.exit_code == 0);
  CHECK(client.Get(a).spec().scheduling().max_duration_hours() == 5);
  CHECK(client.Get(a).spec().scheduling().max_retries() == 7);
  CHECK(Mcli(ep, alice, "describe run " + a).output.find("watchdog off") != std::string::npos);

  // Metadata filters: every pair must match, exactly.
  const std::string b = submit("run -f " + nlp + " --name sweep-b");
  const std::string cv =
      WriteFile("cv.yaml",
                "name: vision\nimage: host\ncommand: python train.py\ncompute:\n  cluster: "
                "local\n  gpus: 8\nmetadata:\n  team: cv\n");
  const std::string c = submit("run -f " + cv);
  Result by_team = Mcli(ep, alice, "get runs -m team=nlp");
  INFO(by_team.output);
  CHECK(by_team.exit_code == 0);
  CHECK(by_team.output.find(a) != std::string::npos);
  CHECK(by_team.output.find(b) != std::string::npos);
  CHECK(by_team.output.find(c) == std::string::npos);
  Result both = Mcli(ep, alice, "get runs -m team=cv -m lr=3e-4");
  CHECK(both.exit_code == 0);
  CHECK(both.output.find(c) == std::string::npos);
  CHECK(Mcli(ep, alice, "get runs --metadata team=cv").output.find(c) != std::string::npos);

  // What changed between two runs: the overrides, line by line.
  Result diff = Mcli(ep, alice, "diff run " + a + " " + b);
  INFO(diff.output);
  CHECK(diff.exit_code == 0);
  CHECK(diff.output.rfind("--- " + a + "\n+++ " + b + "\n", 0) == 0);
  CHECK(DiffHas(diff.output, '-', "gpus: 16"));
  CHECK(DiffHas(diff.output, '+', "gpus: 8"));
  CHECK(DiffHas(diff.output, '-', "registry.example/nlp/train:2"));
  CHECK_FALSE(DiffHas(diff.output, '-', "team: nlp"));  // the same in both
  CHECK(Mcli(ep, alice, "diff run " + b + " " + b).output.find("have the same spec") !=
        std::string::npos);

  // A copy with overrides, a copy as it was, and an ended run started again.
  const std::string copy = submit("run --clone " + a + " --gpus 8 --nodes 1 --node-names node-1");
  CHECK(copy != a);
  const v1::Run copied = client.Get(copy);
  CHECK(copied.spec().compute().gpus() == 8);
  CHECK(copied.spec().image() == "registry.example/nlp/train:2");
  CHECK(copied.spec().metadata().at("team") == "nlp");
  CHECK(Mcli(ep, alice, "describe run " + copy).output.find("A clone of run " + a) !=
        std::string::npos);
  const std::string same = submit("run --clone " + c);
  CHECK(client.Get(same).spec().metadata().at("team") == "cv");

  CHECK(Mcli(ep, alice, "stop run " + a).exit_code == 0);
  client.WaitForStatus(a, v1::RUN_STATUS_STOPPED);
  CHECK(submit("run -r " + a) == a);
  const v1::Run restarted = client.Get(a);
  CHECK_FALSE(IsTerminal(restarted.status()));
  CHECK(restarted.spec().compute().gpus() == 16);
  Result running_again = Mcli(ep, alice, "run -r " + b);
  CHECK(running_again.exit_code == 1);
  CHECK(running_again.output.find("only an ended run can be restarted") != std::string::npos);
}

}  // namespace mcli_e2e_test
}  // namespace tessera::testing
