#include "worker/daemon/rank_launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/poll_until.h"
#include "tests/support/temp_dir.h"

namespace tessera::worker {
namespace rank_launcher_test {

namespace fs = std::filesystem;

// The test's folder, as a resolved path.
struct TempDir {
  testing::TempDir dir{"rank_launcher_test"};
  const fs::path path = fs::canonical(dir.path);
};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Orphaned grandchildren are re-parented to us, so we can reap them and see them disappear
// (PID 1 of a container does not always reap zombies).
void BecomeSubreaper() { REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0); }

// Waits for the first line of `p` (a pid a rank printed).
pid_t ReadPidLine(const fs::path& p) {
  for (int i = 0; i < 200; ++i) {
    std::string s = ReadFile(p);
    if (s.find('\n') != std::string::npos) return static_cast<pid_t>(std::stol(s));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL("no pid line in " << p);
  return -1;
}

// True once `pid` no longer exists (reaping it if it is our zombie).
bool GoneWithin(pid_t pid, absl::Duration timeout) {
  return testing::PollUntil(
      [pid] {
        ::waitpid(pid, nullptr, WNOHANG);
        return ::kill(pid, 0) != 0 && errno == ESRCH;
      },
      timeout);
}

RankSpec Spec(const TempDir& tmp, std::string command) {
  RankSpec spec;
  spec.command = std::move(command);
  spec.working_dir = (tmp.path / "work").string();
  spec.stdout_path = "stdout.log";
  spec.stderr_path = "stderr.log";
  return spec;
}

// Time moves only when someone sleeps, by the amount slept; real time passes 100 us a sleep.
class SteppingClock final : public Clock {
 public:
  absl::Time Now() const override { return now_; }
  void SleepFor(absl::Duration d) override {
    now_ += d;
    absl::SleepFor(absl::Microseconds(100));
  }

 private:
  absl::Time now_ = absl::UnixEpoch();
};

TEST_CASE("a rank gets exactly its environment, its working folder and its output files") {
  TempDir tmp;
  ::setenv("TESSERA_RANK_LAUNCHER_SECRET", "leak", 1);
  RankSpec spec;
  spec.rank = 5;
  spec.local_rank = 1;
  spec.env = {{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"HOME", "/rank/home"}};
  spec.working_dir = (tmp.path / "runs" / "r1" / "rank5").string();
  spec.stdout_path = "out.log";  // relative to working_dir
  spec.stderr_path = (tmp.path / "err.log").string();
  spec.command =
      "echo rank=$RANK local=$LOCAL_RANK; pwd; echo home=$HOME; "
      "echo secret=${TESSERA_RANK_LAUNCHER_SECRET-unset}; echo path=${PATH:+set}; echo oops >&2";
  fs::create_directories(spec.working_dir);
  { std::ofstream(fs::path(spec.working_dir) / "out.log") << "earlier\n"; }  // appended to

  auto p = RankProcess::Start(spec);
  REQUIRE(p.ok());
  CHECK((*p)->pid() > 0);
  CHECK((*p)->rank() == 5);
  auto exit = (*p)->WaitFor(absl::Seconds(5));
  REQUIRE(exit.ok());
  CHECK(*exit == ExitInfo{0, 0});
  CHECK((*p)->exit() == ExitInfo{0, 0});

  const std::string expected_path = std::getenv("PATH") ? "set" : "";
  CHECK(ReadFile(fs::path(spec.working_dir) / "out.log") ==
        "earlier\nrank=5 local=1\n" + spec.working_dir +
            "\nhome=/rank/home\nsecret=unset\npath=" + expected_path + "\n");
  CHECK(ReadFile(tmp.path / "err.log") == "oops\n");
  ::unsetenv("TESSERA_RANK_LAUNCHER_SECRET");
}

TEST_CASE("a rank leads a session of its own: its own process group, no controlling terminal") {
  TempDir tmp;
  // /proc/self/stat of the shell: pid (1), pgrp (5), session (6), tty_nr (7).
  auto p = RankProcess::Start(Spec(tmp,
                                   "read -r pid comm state ppid pgrp sid tty rest < /proc/$$/stat; "
                                   "echo $pid $pgrp $sid $tty"));
  REQUIRE(p.ok());
  REQUIRE((*p)->WaitFor(absl::Seconds(5)).ok());
  const std::string pid = std::to_string((*p)->pid());
  CHECK(ReadFile(tmp.path / "work" / "stdout.log") == pid + " " + pid + " " + pid + " 0\n");
}

TEST_CASE("a rank runs at its nice value, below the worker's priority") {
  TempDir tmp;
  errno = 0;
  const int own = ::getpriority(PRIO_PROCESS, 0);
  REQUIRE(errno == 0);
  RankSpec spec = Spec(tmp, "nice");  // coreutils' nice prints the niceness it runs at
  spec.nice = std::min(19, own + 5);
  auto p = RankProcess::Start(spec);
  REQUIRE(p.ok());
  REQUIRE((*p)->WaitFor(absl::Seconds(5)).ok());
  CHECK(ReadFile(tmp.path / "work" / "stdout.log") == std::to_string(spec.nice) + "\n");
  // The worker itself is untouched.
  CHECK(::getpriority(PRIO_PROCESS, 0) == own);
}

TEST_CASE("a rank given descriptors reads its stdin and writes its stdout through them") {
  TempDir tmp;
  int ends[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) == 0);
  RankSpec spec = Spec(tmp, "read -r line; echo \"got $line\"");
  spec.stdin_fd = ends[1];
  spec.stdout_fd = ends[1];
  auto p = RankProcess::Start(spec);
  ::close(ends[1]);  // the rank has its copies
  REQUIRE(p.ok());
  REQUIRE(::write(ends[0], "hello\n", 6) == 6);
  REQUIRE((*p)->WaitFor(absl::Seconds(5)).ok());
  char buffer[64] = {};
  const ssize_t n = ::read(ends[0], buffer, sizeof buffer - 1);
  ::close(ends[0]);
  CHECK(std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0) == "got hello\n");
  CHECK_FALSE(fs::exists(tmp.path / "work" / "stdout.log"));  // stdout_path unused
}

TEST_CASE("the working folder is created when missing") {
  TempDir tmp;
  auto p = RankProcess::Start(Spec(tmp, "true"));
  REQUIRE(p.ok());
  REQUIRE((*p)->WaitFor(absl::Seconds(5)).ok());
  CHECK(fs::is_directory(tmp.path / "work"));
  CHECK(fs::exists(tmp.path / "work" / "stdout.log"));
}

TEST_CASE("exit codes and terminating signals are collected") {
  TempDir tmp;
  SECTION("exit 3") {
    auto p = RankProcess::Start(Spec(tmp, "exit 3"));
    REQUIRE(p.ok());
    auto exit = (*p)->WaitFor(absl::Seconds(5));
    REQUIRE(exit.ok());
    CHECK(exit->exit_code == 3);
    CHECK(exit->signal == 0);
    CHECK_FALSE(exit->signaled());
    CHECK(exit->ToString() == "exit code 3");
  }
  SECTION("killed by a signal it sent itself") {
    auto p = RankProcess::Start(Spec(tmp, "kill -USR1 $$; sleep 5"));
    REQUIRE(p.ok());
    auto exit = (*p)->WaitFor(absl::Seconds(5));
    REQUIRE(exit.ok());
    CHECK(exit->signal == SIGUSR1);
    CHECK(exit->signaled());
    CHECK(exit->ToString() == "killed by signal " + std::to_string(SIGUSR1) + " (SIGUSR1)");
  }
  SECTION("Kill sends SIGKILL") {
    auto p = RankProcess::Start(Spec(tmp, "sleep 100"));
    REQUIRE(p.ok());
    CHECK_FALSE((*p)->Poll());
    CHECK_FALSE((*p)->exit().has_value());
    CHECK((*p)->WaitFor(absl::Milliseconds(20)).status().code() ==
          absl::StatusCode::kDeadlineExceeded);
    REQUIRE((*p)->Kill().ok());
    auto exit = (*p)->WaitFor(absl::Seconds(5));
    REQUIRE(exit.ok());
    CHECK(exit->signal == SIGKILL);
    CHECK((*p)->Kill().ok());  // the group is gone: still fine
  }
}

TEST_CASE("Stop: a rank that exits on SIGTERM stops before the grace period ends") {
  TempDir tmp;
  auto p = RankProcess::Start(Spec(tmp, "exec sleep 100"));
  REQUIRE(p.ok());
  const absl::Time start = absl::Now();
  auto exit = (*p)->Stop(absl::Seconds(5));
  REQUIRE(exit.ok());
  CHECK(exit->signal == SIGTERM);
  CHECK(absl::Now() - start < absl::Seconds(2));
}

TEST_CASE("Stop: a rank that ignores SIGTERM is SIGKILLed after the grace, with its children") {
  BecomeSubreaper();
  TempDir tmp;
  auto p = RankProcess::Start(Spec(tmp, "trap '' TERM; sleep 100 & echo $!; wait"));
  REQUIRE(p.ok());
  const pid_t grandchild = ReadPidLine(tmp.path / "work" / "stdout.log");
  REQUIRE(::kill(grandchild, 0) == 0);

  const absl::Time start = absl::Now();
  auto exit = (*p)->Stop(absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  REQUIRE(exit.ok());
  CHECK(exit->signal == SIGKILL);
  CHECK(took >= absl::Milliseconds(300));
  CHECK(took < absl::Seconds(3));
  CHECK(GoneWithin(grandchild, absl::Seconds(2)));
  CHECK(::kill((*p)->pid(), 0) == -1);
}

TEST_CASE("Stop measures the grace period on the injected clock") {
  TempDir tmp;
  auto p = RankProcess::Start(Spec(tmp, "trap '' TERM; echo $$; while :; do sleep 0.05; done"));
  REQUIRE(p.ok());
  REQUIRE(ReadPidLine(tmp.path / "work" / "stdout.log") == (*p)->pid());  // the trap is set
  SteppingClock clock;
  const absl::Time start = absl::Now();
  auto exit = (*p)->Stop(absl::Seconds(10), clock);  // 1000 fake sleeps of 10 ms
  REQUIRE(exit.ok());
  CHECK(exit->signal == SIGKILL);
  CHECK(clock.Now() - absl::UnixEpoch() == absl::Seconds(10));
  CHECK(absl::Now() - start < absl::Seconds(5));
}

TEST_CASE("the destructor kills the whole group of a running rank") {
  BecomeSubreaper();
  TempDir tmp;
  pid_t leader;
  pid_t grandchild;
  {
    auto p = RankProcess::Start(Spec(tmp, "sleep 100 & echo $!; wait"));
    REQUIRE(p.ok());
    leader = (*p)->pid();
    grandchild = ReadPidLine(tmp.path / "work" / "stdout.log");
  }
  CHECK(::kill(leader, 0) == -1);
  CHECK(GoneWithin(grandchild, absl::Seconds(2)));
}

TEST_CASE("start errors name what failed") {
  TempDir tmp;
  { std::ofstream(tmp.path / "a-file") << "x"; }

  SECTION("a working folder that cannot be created") {
    RankSpec spec = Spec(tmp, "true");
    spec.working_dir = (tmp.path / "a-file" / "work").string();
    auto p = RankProcess::Start(spec);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(p.status().message()),
               Catch::Contains("working folder '" + spec.working_dir + "'"));
  }
  SECTION("an output file that cannot be opened") {
    RankSpec spec = Spec(tmp, "true");
    spec.stderr_path = (tmp.path / "a-file" / "err.log").string();
    auto p = RankProcess::Start(spec);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(std::string(p.status().message()), Catch::Contains(spec.stderr_path));
  }
  SECTION("a shell that cannot be executed is an error, not a silent exit") {
    RankSpec spec = Spec(tmp, "true");
    spec.shell = (tmp.path / "no-such-shell").string();
    auto p = RankProcess::Start(spec);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(
        std::string(p.status().message()),
        Catch::Contains("cannot execute '" + spec.shell + "'") && Catch::Contains("No such file"));
  }
  SECTION("an empty command or a bad variable name") {
    CHECK(RankProcess::Start(Spec(tmp, "")).status().code() == absl::StatusCode::kInvalidArgument);
    RankSpec spec = Spec(tmp, "true");
    spec.env["A=B"] = "x";
    CHECK(RankProcess::Start(spec).status().code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("StopAll stops several ranks together and reports each one") {
  BecomeSubreaper();
  TempDir tmp;
  RankSpec polite = Spec(tmp, "exec sleep 100");
  polite.working_dir = (tmp.path / "r0").string();
  RankSpec stubborn = Spec(tmp, "trap '' TERM; sleep 100 & echo $!; wait");
  stubborn.working_dir = (tmp.path / "r1").string();
  RankSpec done = Spec(tmp, "exit 7");
  done.working_dir = (tmp.path / "r2").string();

  auto p0 = RankProcess::Start(polite);
  auto p1 = RankProcess::Start(stubborn);
  auto p2 = RankProcess::Start(done);
  REQUIRE(p0.ok());
  REQUIRE(p1.ok());
  REQUIRE(p2.ok());
  const pid_t grandchild = ReadPidLine(tmp.path / "r1" / "stdout.log");
  REQUIRE((*p2)->WaitFor(absl::Seconds(5)).ok());

  const absl::Time start = absl::Now();
  std::vector<ExitInfo> exits = StopAll({p0->get(), p1->get(), p2->get()}, absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  REQUIRE(exits.size() == 3);
  CHECK(exits[0] == ExitInfo{-1, SIGTERM});
  CHECK(exits[1] == ExitInfo{-1, SIGKILL});
  CHECK(exits[2] == ExitInfo{7, 0});
  CHECK(took >= absl::Milliseconds(300));
  CHECK(took < absl::Seconds(3));
  CHECK(GoneWithin(grandchild, absl::Seconds(2)));
  CHECK((*p0)->exit() == exits[0]);
  CHECK((*p1)->exit() == exits[1]);
}

}  // namespace rank_launcher_test
}  // namespace tessera::worker
