#include "worker/daemon/owned_children.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "worker/daemon/rank_launcher.h"

namespace tessera::worker {
namespace owned_children_test {

// Waits until `pid` is a zombie (ended, not yet reaped).
bool BecomesZombie(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    siginfo_t info{};
    // WNOWAIT: look without reaping.
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  return false;
}

TEST_CASE("a scan never reaps a child its owner waits for, and reaps one nobody owns") {
  const pid_t owned = ForkOwnedChild([] { ::_exit(7); });
  REQUIRE(owned > 0);
  REQUIRE(IsOwnedChild(owned));
  REQUIRE(BecomesZombie(owned));

  const pid_t unowned = ::fork();
  if (unowned == 0) ::_exit(0);
  REQUIRE(BecomesZombie(unowned));

  CHECK(ReapUnownedZombies() >= 1);
  // The unowned zombie is gone; the owned one still holds its status for its owner.
  siginfo_t info{};
  CHECK(::waitid(P_PID, static_cast<id_t>(unowned), &info, WEXITED | WNOHANG) != 0);
  int status = 0;
  REQUIRE(::waitpid(owned, &status, 0) == owned);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
  ReleaseOwnedChild(owned);
  CHECK_FALSE(IsOwnedChild(owned));
}

TEST_CASE("ranks that exit at once keep their exit status while zombies are reaped beside them") {
  // The race that lost statuses: a rank that ends while its siblings are being started, and a
  // scan for adopted zombies that runs in between. Many short ranks, scans in a tight loop.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  std::atomic<bool> done{false};
  std::thread scanner([&] {
    while (!done) ReapUnownedZombies();
  });
  std::vector<std::unique_ptr<RankProcess>> ranks;
  for (int i = 0; i < 40; ++i) {
    RankSpec spec;
    spec.rank = i;
    // Also leaves an orphan behind (re-parented to this subreaper) for the scan to reap.
    spec.command = i % 2 == 0 ? "exit 3" : "(sleep 0.01 &) ; exit 0";
    spec.stdout_path = "/dev/null";
    spec.stderr_path = "/dev/null";
    auto proc = RankProcess::Start(spec);
    REQUIRE(proc.ok());
    ranks.push_back(*std::move(proc));
  }
  for (auto& rank : ranks) {
    auto waited = rank->WaitFor(absl::Seconds(10));
    REQUIRE(waited.ok());
    const ExitInfo exit = *waited;
    INFO("rank " << rank->rank() << ": " << exit.ToString());
    CHECK_FALSE(exit.status_lost);
    CHECK(exit.exit_code == (rank->rank() % 2 == 0 ? 3 : 0));
  }
  done = true;
  scanner.join();
}

}  // namespace owned_children_test
}  // namespace tessera::worker
