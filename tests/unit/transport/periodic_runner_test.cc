// The services' background loops: each run exactly one interval of the injected clock after the
// previous one ended, and a stop that does not wait for the clock.
#include "transport/periodic_runner.h"

#include <catch2/catch.hpp>
#include <vector>

namespace tessera {
namespace periodic_runner_test {

// Records the clock's time at each run; a run may take time on the clock.
struct Runs {
  explicit Runs(std::shared_ptr<FakeClock> c) : clock(std::move(c)) {}
  void Run() {
    absl::MutexLock lock(&mu);
    at.push_back(clock->Now());
    if (!run_takes.empty()) {
      const absl::Duration d = run_takes.front();
      run_takes.erase(run_takes.begin());
      mu.Unlock();
      clock->Advance(d);
      mu.Lock();
    }
  }
  std::vector<absl::Time> Times() {
    absl::MutexLock lock(&mu);
    return at;
  }

  std::shared_ptr<FakeClock> clock;
  absl::Mutex mu;
  std::vector<absl::Time> at ABSL_GUARDED_BY(mu);
  std::vector<absl::Duration> run_takes ABSL_GUARDED_BY(mu);
};

TEST_CASE("a periodic runner runs one interval after its start, then one after each run") {
  auto clock = std::make_shared<FakeClock>();
  const absl::Time start = clock->Now();
  Runs runs(clock);
  PeriodicRunner runner(clock, absl::Seconds(1), [&] { runs.Run(); });

  REQUIRE(clock->AwaitWaiters(1));
  clock->Advance(absl::Milliseconds(999));
  CHECK(clock->waiters() == 1);
  CHECK(runs.Times().empty());
  clock->Advance(absl::Milliseconds(1));
  REQUIRE(clock->AwaitWaiters(1));  // waiting again: the run is over
  CHECK(runs.Times() == std::vector<absl::Time>{start + absl::Seconds(1)});

  clock->Advance(absl::Seconds(1));
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(runs.Times() ==
        std::vector<absl::Time>{start + absl::Seconds(1), start + absl::Seconds(2)});
}

TEST_CASE("a periodic runner told to start at once runs at its start, then one interval after") {
  auto clock = std::make_shared<FakeClock>();
  const absl::Time start = clock->Now();
  Runs runs(clock);
  PeriodicRunner runner(
      clock, absl::Seconds(1), [&] { runs.Run(); }, PeriodicRunner::FirstRun::kAtOnce);
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(runs.Times() == std::vector<absl::Time>{start});
  clock->Advance(absl::Seconds(1));
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(runs.Times() == std::vector<absl::Time>{start, start + absl::Seconds(1)});
}

TEST_CASE("a periodic runner measures its interval from the end of a slow run") {
  auto clock = std::make_shared<FakeClock>();
  const absl::Time start = clock->Now();
  Runs runs(clock);
  {
    absl::MutexLock lock(&runs.mu);
    runs.run_takes = {absl::Seconds(5)};
  }
  PeriodicRunner runner(clock, absl::Seconds(1), [&] { runs.Run(); });
  REQUIRE(clock->AwaitWaiters(1));
  clock->Advance(absl::Seconds(1));  // the run starts at 1 s and ends at 6 s
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(clock->Now() == start + absl::Seconds(6));
  clock->Advance(absl::Milliseconds(999));
  CHECK(runs.Times().size() == 1);  // no catch-up run
  clock->Advance(absl::Milliseconds(1));
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(runs.Times() ==
        std::vector<absl::Time>{start + absl::Seconds(1), start + absl::Seconds(7)});
}

TEST_CASE("a periodic runner runs at a deadline before its interval, then on its beat again") {
  auto clock = std::make_shared<FakeClock>();
  const absl::Time start = clock->Now();
  const absl::Time deadline = start + absl::Milliseconds(300);
  Runs runs(clock);
  // A deadline 300 ms ahead: once it has passed it is no longer waited for (no spinning).
  PeriodicRunner runner(
      clock, absl::Seconds(1), [&] { runs.Run(); }, PeriodicRunner::FirstRun::kAtOnce,
      [&] { return deadline - clock->Now(); });
  REQUIRE(clock->AwaitWaiters(1));
  clock->Advance(absl::Milliseconds(299));
  CHECK(runs.Times().size() == 1);
  clock->Advance(absl::Milliseconds(1));
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(runs.Times() == std::vector<absl::Time>{start, deadline});
  clock->Advance(absl::Milliseconds(999));
  CHECK(runs.Times().size() == 2);
  clock->Advance(absl::Milliseconds(1));
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(runs.Times() == std::vector<absl::Time>{start, deadline, deadline + absl::Seconds(1)});
}

TEST_CASE("destroying a periodic runner stops it without moving the clock") {
  auto clock = std::make_shared<FakeClock>();
  const absl::Time start = clock->Now();
  Runs runs(clock);
  {
    PeriodicRunner runner(clock, absl::Hours(1), [&] { runs.Run(); });
    REQUIRE(clock->AwaitWaiters(1));
  }
  CHECK(clock->waiters() == 0);
  CHECK(clock->Now() == start);
  CHECK(runs.Times().empty());
}

}  // namespace periodic_runner_test
}  // namespace tessera
