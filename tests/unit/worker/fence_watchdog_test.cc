// The fence watchdog's timing: it sleeps until the lease's deadline (no polling while the worker
// renews it), wakes when the worker writes a new deadline or exits, and outlives a dead worker
// only until the deadline. The watchdog runs in a thread here, watching a child process that
// stands for the worker; real time on the machine-wide monotonic clock, as in production.
#include "worker/daemon/fence_watchdog.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>

#include "base/clock.h"
#include "tests/support/temp_dir.h"

namespace tessera::worker {
namespace fence_watchdog_test {

// A process standing for the worker, until Kill.
struct FakeWorker {
  FakeWorker() {
    pid = ::fork();
    if (pid == 0) {
      ::pause();
      ::_exit(0);
    }
  }
  // Killed and left a zombie (not reaped), as a worker whose parent has not reaped it yet.
  void Kill() { ::kill(pid, SIGKILL); }
  ~FakeWorker() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  pid_t pid = -1;
};

absl::Time MonotonicNow() { return MonotonicClock().Now(); }

// Runs the watchdog; the future is ready when it returns.
std::future<int> Watch(const std::string& dir, pid_t worker) {
  return std::async(std::launch::async,
                    [dir, worker] { return FenceWatchdogMain(dir, absl::ZeroDuration(), worker); });
}

bool ReturnsWithin(std::future<int>& f, absl::Duration d) {
  return f.wait_for(std::chrono::milliseconds(absl::ToInt64Milliseconds(d))) ==
         std::future_status::ready;
}

TEST_CASE("the fence watchdog outlives a dead worker until its lease's deadline, then exits") {
  testing::TempDir dir{"fence_watchdog_test"};
  FakeWorker worker;
  LeaseFile lease(dir.path);
  const absl::Time deadline = MonotonicNow() + absl::Milliseconds(600);
  lease.Write(deadline);
  auto done = Watch(dir.path, worker.pid);
  worker.Kill();
  CHECK_FALSE(ReturnsWithin(done, absl::Milliseconds(300)));  // ranks may still be running
  REQUIRE(ReturnsWithin(done, absl::Seconds(2)));
  CHECK(MonotonicNow() >= deadline);
  CHECK(done.get() == 0);
}

TEST_CASE("the fence watchdog wakes for a deadline written earlier than the one it sleeps on") {
  testing::TempDir dir{"fence_watchdog_test"};
  FakeWorker worker;
  LeaseFile lease(dir.path);
  lease.Write(MonotonicNow() + absl::Minutes(10));
  auto done = Watch(dir.path, worker.pid);
  worker.Kill();
  CHECK_FALSE(ReturnsWithin(done, absl::Milliseconds(200)));
  // A new registration with a shorter lease: the watchdog must not sleep on the old deadline.
  const absl::Time deadline = MonotonicNow() + absl::Milliseconds(200);
  lease.Write(deadline);
  REQUIRE(ReturnsWithin(done, absl::Seconds(3)));
  CHECK(MonotonicNow() >= deadline);
}

TEST_CASE("with no deadline yet, the fence watchdog exits as soon as the worker is gone") {
  testing::TempDir dir{"fence_watchdog_test"};
  FakeWorker worker;
  LeaseFile lease(dir.path);  // no registration yet: nothing can run
  auto done = Watch(dir.path, worker.pid);
  CHECK_FALSE(ReturnsWithin(done, absl::Milliseconds(200)));
  worker.Kill();
  REQUIRE(ReturnsWithin(done, absl::Seconds(2)));
}

}  // namespace fence_watchdog_test
}  // namespace tessera::worker
