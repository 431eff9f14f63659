// A user's view of live logs, all real: PostgreSQL, tessera-server, two tessera-worker daemons
// with simulated GPUs, and the mcli binary (and curl for the REST route).
#include <signal.h>
#include <stdlib.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/local_cluster.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace {

ShellResult Mcli(LocalCluster& c, const std::string& args) { return c.Mcli(args); }

// A file in the test binary's own temporary folder (removed when it exits).
std::string WriteFile(const std::string& name, const std::string& text) {
  static const TempDir dir("tessera-logs-e2e");
  return dir.Write(name, text);
}

TEST_CASE("mcli run submit --follow shows the run's status and its ranks' output live", "[e2e]") {
  LocalCluster c;
  c.StartWorker("node-a");
  c.StartWorker("node-b");
  const std::string yaml = WriteFile("hello.yaml", R"(name: hello
image: host
command: |
  echo "hello from rank $RANK of $WORLD_SIZE"
  sleep 1
  echo "rank $RANK done"
compute:
  gpus: 4
  nodes: 2
)");
  ShellResult followed = Mcli(c, "run submit -f " + yaml + " --follow");
  INFO(followed.output);
  CHECK(followed.exit_code == 0);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK(absl::StrContains(followed.output, absl::StrCat("hello from rank ", rank, " of 4")));
    CHECK(absl::StrContains(followed.output, absl::StrCat("rank ", rank, " done")));
  }
  CHECK(absl::StrContains(followed.output, "RUNNING"));
  CHECK(absl::StrContains(followed.output, "COMPLETED"));
}

TEST_CASE("mcli logs filters by rank, tails, and shows a failed run's failing rank", "[e2e]") {
  LocalCluster c;
  c.StartWorker("node-a");
  const std::string yaml = WriteFile("fail.yaml", R"(name: boom
image: host
command: |
  i=0; while [ $i -lt 20 ]; do echo "rank $RANK line $i"; i=$((i+1)); done
  if [ "$RANK" = 1 ]; then
    echo "Traceback (most recent call last):" >&2
    echo '  File "train.py", line 3, in <module>' >&2
    echo "ZeroDivisionError: division by zero" >&2
    exit 3
  fi
  sleep 30
compute:
  gpus: 2
)");
  ShellResult submitted = Mcli(c, "run -f " + yaml);
  REQUIRE(submitted.exit_code == 0);
  const std::string name(absl::StripAsciiWhitespace(submitted.output));
  c.client->WaitForStatus(name, v1::RUN_STATUS_FAILED);

  // A failed run shows its first failed rank by default.
  ShellResult failed;
  for (int i = 0; i < 100; ++i) {  // the last lines arrive just after the run ends
    failed = Mcli(c, "logs " + name);
    if (absl::StrContains(failed.output, "ZeroDivisionError")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(failed.output);
  CHECK(failed.exit_code == 0);
  CHECK(absl::StrContains(failed.output, "rank 1 line 19"));
  CHECK_FALSE(absl::StrContains(failed.output, "rank 0 line"));

  ShellResult tail = Mcli(c, "logs " + name + " --rank 0 --tail 3");
  INFO(tail.output);
  CHECK(tail.output == "rank 0 line 17\nrank 0 line 18\nrank 0 line 19\n");

  ShellResult exception = Mcli(c, "logs " + name + " --first-exception");
  INFO(exception.output);
  CHECK(absl::StrContains(exception.output, "Traceback (most recent call last):"));
  CHECK(absl::StrContains(exception.output, "ZeroDivisionError: division by zero"));

  ShellResult bad = Mcli(c, "logs " + name + " --prev --resumption 0");
  CHECK(bad.exit_code == 2);

  // The same over REST, and as Server-Sent Events.
  const std::string base =
      absl::StrCat("http://127.0.0.1:", c.server.http_port, "/api/v1/runs/", name, "/logs");
  const std::string auth = "-H 'Authorization: Bearer " + c.admin_key + "'";
  ShellResult json = RunShell("curl -sS " + auth + " '" + base + "?rank=0&tail=2'");
  INFO(json.output);
  CHECK(absl::StrContains(json.output, "\"lines\""));
  CHECK(absl::StrContains(json.output, "rank 0 line 19"));
  CHECK_FALSE(absl::StrContains(json.output, "rank 0 line 17"));
  ShellResult sse =
      RunShell("curl -sS -N --max-time 20 " + auth + " '" + base + "?rank=0&follow=true'");
  INFO(sse.output);
  CHECK(absl::StrContains(sse.output, "event: log"));
  CHECK(absl::StrContains(sse.output, "rank 0 line 0"));
  CHECK(absl::StrContains(sse.output, "rank 0 line 19"));

  // Deleting the run deletes its logs.
  REQUIRE(Mcli(c, "delete run " + name).exit_code == 0);
  CHECK(Mcli(c, "logs " + name).exit_code == 1);
}

}  // namespace
}  // namespace tessera::testing
