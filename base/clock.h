#pragma once
// Time is injected everywhere so that timeouts, leases and backoff are tested exactly.
//
// Two ways to let time pass, for two kinds of code:
//  - SleepFor: code that drives time itself (a worker's polling loop). A fake clock just moves on
//    by the time slept, so a single-threaded test runs through the loop without waiting.
//  - AwaitWithDeadline / WaitUntil: a background thread waiting for something or for a moment
//    (a follower for new lines, a periodic runner for its next run). A fake clock ends such a wait
//    only when the test moves it past the deadline or the condition becomes true, so a test
//    decides exactly when each wait ends and nothing sleeps on the real clock.

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Waits `d` of this clock's time (a fake clock just moves on).
  virtual void SleepFor(absl::Duration d) = 0;

  // With `mu` held (as absl::Mutex::AwaitWithDeadline), waits until `cond` holds or this clock
  // reaches `deadline`; `mu` is released while waiting and held again on return. Returns whether
  // `cond` holds. `cond` must depend only on state guarded by `mu`.
  //
  // The default, for clocks that only know Now and SleepFor (a test's stepping clock), checks
  // `cond` between sleeps of at most 10 ms of this clock; SystemClock and FakeClock override it.
  virtual bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // AwaitWithDeadline with a deadline `timeout` from now.
  bool AwaitWithTimeout(absl::Mutex& mu, const absl::Condition& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return AwaitWithDeadline(mu, cond, Now() + timeout);
  }

  // Waits until this clock reaches `deadline`: the pause of a polling loop on a service thread.
  // Unlike SleepFor, a fake clock does not move by itself: the wait ends when the test moves it.
  void WaitUntil(absl::Time deadline);
};

// The wall clock.
class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return mu.AwaitWithDeadline(cond, deadline);
  }
  // A process-wide instance for production wiring.
  static std::shared_ptr<Clock> Shared();
};

// The kernel's monotonic clock (CLOCK_MONOTONIC), as an absl::Time counted from the Unix epoch:
// it never steps when the wall clock is set, and every process of the machine reads the same
// value, so two processes can share deadlines (the worker and its fence watchdog). For leases,
// deadlines, timeouts and watchdogs; never shown to people or stored as a date.
class MonotonicClock final : public Clock {
 public:
  absl::Time Now() const override;
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  static std::shared_ptr<Clock> Shared();
};

// A clock that moves only when a test tells it to (Advance, Set, or a SleepFor of the code under
// test). Threads waiting on it (AwaitWithDeadline, WaitUntil) wake when a move reaches their
// deadline; AwaitWaiters lets a test move it only once a thread is waiting, so that which wait a
// move ends is exact. A move locks each woken waiter's mutex: do not move the clock while holding
// a mutex that a thread waits on it with.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void SleepFor(absl::Duration d) override { Advance(d); }
  void Advance(absl::Duration d);
  void Set(absl::Time t);

  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // How many threads wait on this clock for a deadline it has not reached.
  size_t waiters() const;
  // Blocks until at least `n` threads wait on this clock; false if that did not happen within
  // `timeout` of real time (a test's guard against hanging, not a sleep).
  bool AwaitWaiters(size_t n, absl::Duration timeout = absl::Seconds(10)) const;

 private:
  struct Waiter;
  // Moves to `t` and wakes the waiters whose deadline it reached.
  void MoveTo(absl::Time t);
  size_t PendingWaiters() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  std::vector<Waiter*> waiters_ ABSL_GUARDED_BY(mu_);
};

// A grid of moments on the clock: `offset` + k * `period` since the Unix epoch, for every k.
// Waits released on a common grid go together (a pump's tick); waits on grids of their own
// (offsets spread over the period) keep apart whatever wakes them.
// The last moment of the grid at or before `t`.
absl::Time TickAtOrBefore(absl::Time t, absl::Duration period,
                          absl::Duration offset = absl::ZeroDuration());
// The first moment of the grid strictly after `t`.
absl::Time TickAfter(absl::Time t, absl::Duration period,
                     absl::Duration offset = absl::ZeroDuration());

}  // namespace tessera
