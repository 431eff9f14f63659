// The clocks' timed waits: a fake clock ends a wait only when it is moved past the deadline or
// the condition becomes true, so tests decide exactly when each wait ends.
#include "base/clock.h"

#include <catch2/catch.hpp>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

namespace tessera {
namespace clock_test {

// One AwaitWithDeadline on its own thread, with a flag the test can set as its condition.
class Waiter {
 public:
  Waiter(Clock& clock, absl::Time deadline) {
    thread_ = std::thread([this, &clock, deadline] {
      absl::MutexLock lock(&mu_);
      result_ = clock.AwaitWithDeadline(mu_, absl::Condition(&flag_), deadline);
      done_.Notify();
    });
  }
  ~Waiter() {
    SetFlag();
    thread_.join();
  }
  void SetFlag() {
    absl::MutexLock lock(&mu_);
    flag_ = true;
  }
  // Real time only as a guard against a hung test.
  bool Returned() { return done_.WaitForNotificationWithTimeout(absl::Seconds(10)); }
  bool result() {
    absl::MutexLock lock(&mu_);
    return result_;
  }

 private:
  absl::Mutex mu_;
  bool flag_ ABSL_GUARDED_BY(mu_) = false;
  bool result_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification done_;
  std::thread thread_;
};

TEST_CASE("a fake clock ends a wait when it is moved to the deadline, not before") {
  FakeClock clock;
  const absl::Time start = clock.Now();
  Waiter waiter(clock, start + absl::Seconds(5));
  REQUIRE(clock.AwaitWaiters(1));
  clock.Advance(absl::Seconds(4));
  CHECK(clock.waiters() == 1);  // the move did not reach it
  clock.Advance(absl::Seconds(1));
  REQUIRE(waiter.Returned());
  CHECK_FALSE(waiter.result());
  CHECK(clock.waiters() == 0);
  CHECK(clock.Now() == start + absl::Seconds(5));
}

TEST_CASE("a fake clock's wait ends when the condition becomes true, the clock unmoved") {
  FakeClock clock;
  const absl::Time start = clock.Now();
  Waiter waiter(clock, start + absl::Hours(1));
  REQUIRE(clock.AwaitWaiters(1));
  waiter.SetFlag();
  REQUIRE(waiter.Returned());
  CHECK(waiter.result());
  CHECK(clock.Now() == start);
  CHECK(clock.waiters() == 0);
}

TEST_CASE("Set and SleepFor wake a fake clock's waiters too") {
  FakeClock clock;
  const absl::Time start = clock.Now();
  {
    Waiter waiter(clock, start + absl::Seconds(3));
    REQUIRE(clock.AwaitWaiters(1));
    clock.Set(start + absl::Minutes(1));
    REQUIRE(waiter.Returned());
    CHECK_FALSE(waiter.result());
  }
  {
    Waiter waiter(clock, clock.Now() + absl::Seconds(2));
    REQUIRE(clock.AwaitWaiters(1));
    clock.SleepFor(absl::Seconds(2));
    REQUIRE(waiter.Returned());
    CHECK_FALSE(waiter.result());
  }
}

TEST_CASE("one move wakes exactly the waiters whose deadline it reached") {
  FakeClock clock;
  const absl::Time start = clock.Now();
  Waiter soon(clock, start + absl::Seconds(1));
  Waiter later(clock, start + absl::Seconds(10));
  REQUIRE(clock.AwaitWaiters(2));
  clock.Advance(absl::Seconds(2));
  REQUIRE(soon.Returned());
  CHECK(clock.waiters() == 1);
  clock.Advance(absl::Seconds(8));
  REQUIRE(later.Returned());
  CHECK_FALSE(later.result());
}

TEST_CASE("a wait whose deadline has passed, or whose condition holds, returns at once") {
  std::vector<std::unique_ptr<Clock>> clocks;
  clocks.push_back(std::make_unique<FakeClock>());
  clocks.push_back(std::make_unique<SystemClock>());
  for (const auto& clock : clocks) {
    absl::Mutex mu;
    absl::MutexLock lock(&mu);
    bool yes = true, no = false;
    CHECK(clock->AwaitWithDeadline(mu, absl::Condition(&yes), clock->Now() + absl::Hours(1)));
    CHECK_FALSE(clock->AwaitWithDeadline(mu, absl::Condition(&no), clock->Now()));
    CHECK_FALSE(clock->AwaitWithTimeout(mu, absl::Condition(&no), -absl::Seconds(1)));
  }
}

TEST_CASE("WaitUntil on a fake clock lasts until the clock is moved there") {
  FakeClock clock;
  const absl::Time deadline = clock.Now() + absl::Milliseconds(200);
  absl::Notification done;
  std::thread t([&] {
    clock.WaitUntil(deadline);
    done.Notify();
  });
  REQUIRE(clock.AwaitWaiters(1));
  clock.Advance(absl::Milliseconds(199));
  CHECK(clock.waiters() == 1);
  clock.Advance(absl::Milliseconds(1));
  CHECK(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  t.join();
}

TEST_CASE("AwaitWaiters gives up after its real-time guard when nobody waits") {
  FakeClock clock;
  CHECK_FALSE(clock.AwaitWaiters(1, absl::Milliseconds(1)));
}

// A clock with only Now and SleepFor, as tests write them: time moves by what is slept.
class SteppingClock final : public Clock {
 public:
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void SleepFor(absl::Duration d) override {
    absl::MutexLock lock(&mu_);
    now_ += d;
    ++sleeps_;
  }
  int sleeps() const {
    absl::MutexLock lock(&mu_);
    return sleeps_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
  int sleeps_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_CASE("the default timed wait sleeps the clock in steps of 10 ms up to the deadline") {
  SteppingClock clock;
  absl::Mutex mu;
  absl::MutexLock lock(&mu);
  bool no = false;
  CHECK_FALSE(clock.AwaitWithTimeout(mu, absl::Condition(&no), absl::Milliseconds(25)));
  CHECK(clock.Now() == absl::UnixEpoch() + absl::Milliseconds(25));
  CHECK(clock.sleeps() == 3);  // 10 + 10 + 5
}

TEST_CASE("a grid of moments: the tick at or before a time, and the one after it") {
  const absl::Time epoch = absl::UnixEpoch();
  const absl::Duration s = absl::Seconds(1), ms = absl::Milliseconds(1);
  // On the plain grid of seconds.
  CHECK(TickAtOrBefore(epoch + 2500 * ms, s) == epoch + 2 * s);
  CHECK(TickAfter(epoch + 2500 * ms, s) == epoch + 3 * s);
  // A time on a tick is its own tick at or before, and the next one is a period on.
  CHECK(TickAtOrBefore(epoch + 2 * s, s) == epoch + 2 * s);
  CHECK(TickAfter(epoch + 2 * s, s) == epoch + 3 * s);
  // With an offset, the grid is shifted: ... 1.3, 2.3, 3.3 ...
  CHECK(TickAtOrBefore(epoch + 2500 * ms, s, 300 * ms) == epoch + 2300 * ms);
  CHECK(TickAfter(epoch + 2500 * ms, s, 300 * ms) == epoch + 3300 * ms);
  CHECK(TickAfter(epoch + 2200 * ms, s, 300 * ms) == epoch + 2300 * ms);
  // Before the epoch too (the remainder of a negative time is taken upward).
  CHECK(TickAtOrBefore(epoch - 2500 * ms, s) == epoch - 3 * s);
  CHECK(TickAfter(epoch - 2500 * ms, s) == epoch - 2 * s);
  // Today's times, at nanosecond precision.
  const absl::Time now = absl::FromUnixNanos(1'764'500'000'123'456'789);
  CHECK(TickAtOrBefore(now, 10 * ms) == absl::FromUnixNanos(1'764'500'000'120'000'000));
  CHECK(TickAfter(now, 10 * ms) == absl::FromUnixNanos(1'764'500'000'130'000'000));
}

}  // namespace clock_test
}  // namespace tessera
