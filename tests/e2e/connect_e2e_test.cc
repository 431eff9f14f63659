// mcli connect, all real: tessera-server, PostgreSQL, a worker with bubblewrap and per-user uids,
// a run's node container. Its owner runs commands inside it (its uid, its processes, its GPUs,
// its variables), an admin may too, another user may not, and the audit log has each attempt;
// on a real terminal, the size follows, Ctrl-C reaches the remote program, the exit code comes
// back (connect_pty.py); the run goes on untouched throughout.
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/local_cluster.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace connect_e2e_test {

TEST_CASE("mcli connect opens a shell in a running run's container, for its owner and admins",
          "[e2e]") {
  LocalCluster c;
  // The node's GPUs as device nodes the sandbox binds (simulated: empty files).
  TempDir dev("tessera-dev");
  for (const char* name : {"nvidia0", "nvidia1", "nvidia2", "nvidiactl"}) dev.Write(name, "");
  OpenToPassThrough(dev.path);
  // No --rank-user: each user's ranks run as the uid the control plane gave that user.
  c.StartWorker("node-a", 3,
                {"--sandbox", "bwrap", "--rank-user", "", "--gpu-device-dir", dev.path});
  OpenToPassThrough(c.worker("node-a").state_dir);
  const std::string alice_key = CreateKey(c.database_url, "alice", "user");
  const std::string bob_key = CreateKey(c.database_url, "bob", "user");
  Client alice(c.server.endpoint(), alice_key);
  const v1::Run run = SubmitAs(alice, "sleeper", "host", "echo uid=$(id -u) up; exec sleep 600", 2,
                               {{"GREETING", "hi"}});
  const std::string said = WaitForOutput(c, run.name(), " up");
  INFO(said);
  REQUIRE(absl::StrContains(said, " up"));
  const std::string uid =
      said.substr(said.find("uid=") + 4, said.find(" up") - said.find("uid=") - 4);
  auto mcli = [&](const std::string& key, const std::string& args) {
    return RunShell(absl::StrCat(
        "TESSERA_CONFIG=/nonexistent TESSERA_ENDPOINT=", c.server.endpoint(),
        " TESSERA_API_KEY=", key, " ", BinaryPath("mcli"), " ", args, " < /dev/null 2>&1"));
  };

  // Piped: what goes in is the shell's input, its end the shell's end.
  const ShellResult piped = RunShell(absl::StrCat(
      "printf 'echo piped-$((6*7))\\nexit 4\\n' | TESSERA_CONFIG=/nonexistent TESSERA_ENDPOINT=",
      c.server.endpoint(), " TESSERA_API_KEY=", alice_key, " ", BinaryPath("mcli"), " connect ",
      run.name(), " 2>&1"));
  INFO(piped.output);
  CHECK(piped.exit_code == 4);
  CHECK(absl::StrContains(piped.output, "piped-42"));
  const ShellResult inside =
      mcli(alice_key, "connect " + run.name() +
                          " --command 'echo uid=$(id -u) greeting=$GREETING; ps -e -o comm=; "
                          "ls /dev; exit 3'");
  INFO(inside.output);
  CHECK(inside.exit_code == 3);  // the shell's
  CHECK(absl::StrContains(inside.output, "uid=" + uid + " greeting=hi"));
  CHECK(absl::StrContains(inside.output, "sleep"));  // the run's own process: one PID namespace
  CHECK(absl::StrContains(inside.output, "nvidia0"));
  CHECK(absl::StrContains(inside.output, "nvidia1"));
  CHECK_FALSE(absl::StrContains(inside.output, "nvidia2"));         // not the run's
  CHECK_FALSE(absl::StrContains(inside.output, "tessera-worker"));  // nothing of the node's

  const ShellResult bob = mcli(bob_key, "connect " + run.name() + " --command 'echo in'");
  INFO(bob.output);
  CHECK(bob.exit_code == 1);
  CHECK(absl::StrContains(bob.output,
                          "only the owner of run " + run.name() + " and admins may connect"));
  CHECK_FALSE(absl::StrContains(bob.output, "\nin"));

  const ShellResult admin =
      mcli(c.admin_key, "connect " + run.name() + " --command 'echo admin-in'");
  INFO(admin.output);
  CHECK(admin.exit_code == 0);
  CHECK(absl::StrContains(admin.output, "admin-in"));
  const ShellResult wrong_node =
      mcli(alice_key, "connect " + run.name() + " --node-rank 3 --command true");
  CHECK(wrong_node.exit_code != 0);
  CHECK(absl::StrContains(wrong_node.output, "has no node rank 3"));

  // A real terminal: its size, a resize, Ctrl-C, the exit code.
  const ShellResult pty = RunShell(
      absl::StrCat("TESSERA_CONFIG=/nonexistent TERM=xterm TESSERA_ENDPOINT=", c.server.endpoint(),
                   " TESSERA_API_KEY=", alice_key, " /usr/bin/python3 ", TESSERA_SOURCE_DIR,
                   "/tests/e2e/connect_pty.py ", BinaryPath("mcli"), " ", run.name(), " 2>&1"));
  INFO(pty.output);
  CHECK(pty.exit_code == 0);

  // Every attempt is in the audit log, the refused one too.
  const ShellResult audit = mcli(c.admin_key, "admin audit");
  INFO(audit.output);
  CHECK(absl::StrContains(audit.output, "ShellService/Connect"));
  CHECK(absl::StrContains(audit.output, "bob"));
  CHECK(absl::StrContains(audit.output, "alice"));

  // mcli interactive: a run that waits, and a shell in it (here its input ends at once, and so
  // does the shell, which leaves the run waiting).
  const ShellResult interactive =
      mcli(alice_key, "interactive --gpus 1 --hours 0.1 --name waiting");
  INFO(interactive.output);
  CHECK(interactive.exit_code == 0);
  CHECK(absl::StrContains(interactive.output, "submitted; waiting for it to start"));
  const size_t named = interactive.output.find("Run waiting");
  REQUIRE(named != std::string::npos);
  const std::string waiting =
      interactive.output.substr(named + 4, interactive.output.find(' ', named + 4) - named - 4);
  CHECK(alice.Get(waiting).status() == v1::RUN_STATUS_RUNNING);

  // The run went on: still its first attempt, still running.
  const v1::Run after = c.client->Get(run.name());
  CHECK(after.status() == v1::RUN_STATUS_RUNNING);
  CHECK(after.resumption_index() == 0);
}

}  // namespace connect_e2e_test
}  // namespace tessera::testing
