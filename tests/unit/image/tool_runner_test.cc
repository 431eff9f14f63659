#include "worker/image/tool_runner.h"

#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "tests/support/temp_dir.h"

namespace tessera::worker::image {
namespace tool_runner_test {

absl::StatusOr<ToolResult> Shell(const std::string& script,
                                 absl::Duration timeout = absl::Seconds(20)) {
  ProcessToolRunner runner;
  return runner.Run({"sh", "-c", script}, timeout);
}

TEST_CASE("a tool's exit code and its stdout and stderr together are returned") {
  auto r = Shell("echo out; echo err >&2; exit 3");
  REQUIRE(r.ok());
  CHECK(r->exit_code == 3);
  CHECK(r->output == "out\nerr\n");
  CHECK(LastLine(r->output) == "err");
  CHECK(LastLine("a\n  b  \n\n") == "b");
  CHECK(LastLine("") == "");
}

TEST_CASE("stdin is /dev/null and a tool killed by a signal reports 128 + the signal") {
  auto r = Shell("cat; echo done");
  REQUIRE(r.ok());
  CHECK(r->output == "done\n");
  r = Shell("kill -TERM $$");
  REQUIRE(r.ok());
  CHECK(r->exit_code == 128 + SIGTERM);
}

TEST_CASE("only the last 64 KiB of the output are kept") {
  auto r = Shell(
      "i=0; while [ $i -lt 3000 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; "
      "i=$((i+1)); done; echo last");
  REQUIRE(r.ok());
  CHECK(r->output.size() == 64 * 1024);
  CHECK(absl::EndsWith(r->output, "line-2999-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\nlast\n"));
}

TEST_CASE("a tool that cannot be run is FAILED_PRECONDITION naming it") {
  ProcessToolRunner runner;
  auto r = runner.Run({"tessera-no-such-tool-xyz", "x"}, absl::Seconds(5));
  CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  // (ENOENT, or EACCES when a folder in PATH cannot be searched)
  CHECK(absl::StartsWith(r.status().message(), "cannot run tessera-no-such-tool-xyz: "));
  r = runner.Run({"/nonexistent/skopeo", "x"}, absl::Seconds(5));
  CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(r.status().message() == "cannot run skopeo: No such file or directory");
  tessera::testing::TempDir tmp{"tool_runner_test"};
  r = runner.Run({tmp.Write("not-executable", "echo hi\n")}, absl::Seconds(5));
  CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(r.status().message() == "cannot run not-executable: Permission denied");
  CHECK(runner.Run({}, absl::Seconds(1)).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a tool past its timeout is killed with all it started") {
  const absl::Time start = absl::Now();
  // The background sleep holds the output pipe open: it must die with the group.
  auto r = Shell("sleep 30 & echo $!; echo started; sleep 30", absl::Milliseconds(500));
  CHECK(absl::Now() - start < absl::Seconds(10));
  CHECK(r.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(r.status().message() ==
        "sh did not finish within 500ms and was killed; its last output: "
        "started");
}

TEST_CASE("cancelling stops the tools running now, with what they started, and every later one") {
  ProcessToolRunner runner;
  absl::StatusOr<ToolResult> result = absl::UnknownError("not run");
  const absl::Time start = absl::Now();
  std::thread pull([&] {
    result = runner.Run({"sh", "-c", "sleep 30 & echo started; sleep 30"}, absl::Minutes(30));
  });
  absl::SleepFor(absl::Milliseconds(300));
  runner.CancelAll();
  pull.join();
  CHECK(absl::Now() - start < absl::Seconds(5));
  CHECK(result.status().code() == absl::StatusCode::kCancelled);
  CHECK(result.status().message() == "sh was stopped: the worker is shutting down");
  const auto later = runner.Run({"true"}, absl::Seconds(5));
  CHECK(later.status().code() == absl::StatusCode::kCancelled);
  CHECK(later.status().message() == "true was not run: the worker is shutting down");
}

TEST_CASE("a watched tool is killed, with what it started, once its watch says stop") {
  tessera::testing::TempDir tmp{"tool_runner_test"};
  const std::string full = tmp.path + "/disk-full";
  ProcessToolRunner runner;
  int asked = 0;
  const absl::Time start = absl::Now();
  // The tool "fills the disk" (makes the marker) and would then run for 30 s more.
  auto r = runner.RunWatched({"sh", "-c", "sleep 30 & touch " + full + "; sleep 30"},
                             absl::Minutes(5), [&]() -> absl::Status {
                               ++asked;
                               if (!std::filesystem::exists(full)) return absl::OkStatus();
                               return absl::ResourceExhaustedError("the disk is full");
                             });
  CHECK(absl::Now() - start < absl::Seconds(20));
  CHECK(asked >= 1);
  CHECK(r.status() == absl::ResourceExhaustedError("the disk is full"));
  // Unwatched, the same runner runs tools as before.
  auto plain = runner.RunWatched({"true"}, absl::Seconds(20), nullptr);
  REQUIRE(plain.ok());
  CHECK(plain->exit_code == 0);
}

TEST_CASE("a tool that exits while something it started holds its output is not waited for") {
  const absl::Time start = absl::Now();
  auto r = Shell("sleep 30 & echo $!; exit 0");
  CHECK(absl::Now() - start < absl::Seconds(10));
  REQUIRE(r.ok());
  CHECK(r->exit_code == 0);
  int pid = 0;
  REQUIRE(absl::SimpleAtoi(LastLine(r->output), &pid));
  // Killed with the group once the tool exited (a zombie of init's until reaped: not signalable
  // as a live process any more is what matters, so check it is gone or a zombie).
  absl::SleepFor(absl::Milliseconds(100));
  const bool alive = ::kill(pid, 0) == 0;
  if (alive) {
    std::string stat;
    FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
    if (f != nullptr) {
      char buf[512] = {};
      stat = std::fgets(buf, sizeof buf, f) ? buf : "";
      std::fclose(f);
    }
    CHECK((stat.empty() || absl::StrContains(stat, ") Z ")));
  }
}

TEST_CASE("fork hooks are used when given, and told when the child was reaped") {
  int forks = 0;
  std::vector<pid_t> reaped;
  ProcessToolRunner::ForkHooks hooks;
  hooks.fork = [&](const std::function<void()>& in_child) {
    ++forks;
    const pid_t pid = ::fork();
    if (pid == 0) {
      in_child();
      ::_exit(127);
    }
    return pid;
  };
  hooks.reaped = [&](pid_t pid) { reaped.push_back(pid); };
  ProcessToolRunner runner(hooks);
  auto r = runner.Run({"true"}, absl::Seconds(5));
  REQUIRE(r.ok());
  CHECK(r->exit_code == 0);
  CHECK(forks == 1);
  CHECK(reaped.size() == 1);
}

}  // namespace tool_runner_test
}  // namespace tessera::worker::image
