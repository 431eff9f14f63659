// A user's view of live logs, all real: PostgreSQL, tessera-server, two tessera-worker daemons
// with simulated GPUs, and the mcli binary (and curl for the REST route).
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/local_cluster.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace logs_e2e_test {

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
launch: rank
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
launch: rank
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

// Runs that are over before the follower catches up (issue 15: each time "PENDING", then
// "COMPLETED    Run queued", and no line): every line, then the final status with its own message.
TEST_CASE("mcli run submit --follow of runs that end at once shows every line, then how it ended",
          "[e2e]") {
  LocalCluster c;
  c.StartWorker("node-a");
  // Status lines are "DATE TIME  STATUS  message": no line pairs a status with another one's
  // message.
  const auto check_statuses = [](const std::string& output) {
    CHECK_FALSE(absl::StrContains(output, "COMPLETED    Run queued"));
    CHECK_FALSE(absl::StrContains(output, "COMPLETED    Run started"));
    CHECK_FALSE(absl::StrContains(output, "FAILED       Run queued"));
    CHECK_FALSE(absl::StrContains(output, "FAILED       Run started"));
  };
  SECTION("one line, three times") {
    const std::string yaml = WriteFile("echo.yaml", R"(name: echo
image: host
launch: rank
command: echo hello-$RANK
compute:
  gpus: 1
)");
    for (int i = 0; i < 3; ++i) {
      ShellResult followed = Mcli(c, "run submit -f " + yaml + " --follow");
      INFO(followed.output);
      CHECK(followed.exit_code == 0);
      const std::vector<std::string> lines =
          absl::StrSplit(absl::StripTrailingAsciiWhitespace(followed.output), '\n');
      CHECK(std::count(lines.begin(), lines.end(), "[rank 0] hello-0") == 1);
      CHECK(absl::StrContains(lines.back(), "COMPLETED    Run completed"));
      check_statuses(followed.output);
    }
  }
  SECTION("a run that fails at once: its line, then FAILED with the exit code, exit 1") {
    const std::string yaml = WriteFile("fail-now.yaml", R"(name: fail-now
image: host
launch: rank
command: echo "boom-$RANK"; exit 3
compute:
  gpus: 1
)");
    ShellResult followed = Mcli(c, "run submit -f " + yaml + " --follow");
    INFO(followed.output);
    CHECK(followed.exit_code == 1);
    CHECK(absl::StrContains(followed.output, "\n[rank 0] boom-0\n"));
    CHECK(absl::StrContains(followed.output, "FAILED       Run failed with exit code 3"));
    CHECK(followed.output.find("boom-0") < followed.output.find("FAILED       Run failed"));
    check_statuses(followed.output);
  }
  SECTION("5,000 lines printed at once: all of them, in order, before the end") {
    const std::string yaml = WriteFile("burst.yaml", R"(name: burst
image: host
command: seq 1 5000
compute:
  gpus: 1
)");
    ShellResult followed = Mcli(c, "run submit -f " + yaml + " --follow");
    REQUIRE(followed.exit_code == 0);
    const std::vector<absl::string_view> lines = absl::StrSplit(followed.output, '\n');
    std::vector<int> numbers;
    for (absl::string_view line : lines) {
      int n = 0;
      // Launched per node (no `launch` in the YAML): the lines are node 0's launcher's.
      if (absl::ConsumePrefix(&line, "[node 0] ") && absl::SimpleAtoi(line, &n)) {
        numbers.push_back(n);
      }
    }
    REQUIRE(numbers.size() == 5000);
    for (int i = 0; i < 5000; ++i) {
      if (numbers[static_cast<size_t>(i)] != i + 1) FAIL("line " << i << " is " << numbers[i]);
    }
    CHECK(followed.output.rfind("] 5000\n") < followed.output.find("COMPLETED    Run completed"));
  }
}

}  // namespace logs_e2e_test
}  // namespace tessera::testing
