#include "base/clock.h"

#include <time.h>

#include <algorithm>
#include <atomic>

namespace tessera {

bool Clock::AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond, absl::Time deadline) {
  const absl::Duration step = absl::Milliseconds(10);
  while (!cond.Eval()) {
    const absl::Time now = Now();
    if (now >= deadline) return false;
    mu.Unlock();
    SleepFor(std::min(step, deadline - now));
    mu.Lock();
  }
  return true;
}

void Clock::WaitUntil(absl::Time deadline) {
  static constexpr bool kNever = false;
  absl::Mutex mu;
  absl::MutexLock lock(&mu);
  AwaitWithDeadline(mu, absl::Condition(&kNever), deadline);
}

std::shared_ptr<Clock> SystemClock::Shared() {
  static const auto clock = std::make_shared<SystemClock>();
  return clock;
}

absl::Time MonotonicClock::Now() const {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return absl::UnixEpoch() + absl::DurationFromTimespec(ts);
}

bool MonotonicClock::AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond,
                                       absl::Time deadline) {
  // absl's deadlines are wall-clock times; a timeout is a duration, whichever clock measured it.
  // Waited in slices so that a wall-clock step during the wait cannot stretch it.
  while (true) {
    const absl::Duration left = deadline - Now();
    if (left <= absl::ZeroDuration()) return cond.Eval();
    if (mu.AwaitWithTimeout(cond, std::min(left, absl::Milliseconds(100)))) return true;
  }
}

std::shared_ptr<Clock> MonotonicClock::Shared() {
  static const auto clock = std::make_shared<MonotonicClock>();
  return clock;
}

// A thread in FakeClock::AwaitWithDeadline. It lives on that thread's stack: a move that reached
// its deadline counts itself in `wakers` before it locks `mu`, and the waiter does not return
// before `wakers` is back to zero, so neither the waiter nor its mutex is gone under the move.
struct FakeClock::Waiter {
  absl::Mutex* mu;
  absl::Time deadline;
  std::atomic<bool> reached{false};  // read by the wait's condition under *mu
  int wakers = 0;                    // guarded by FakeClock::mu_
};

void FakeClock::Advance(absl::Duration d) {
  absl::Time t;
  {
    absl::MutexLock lock(&mu_);
    t = now_ + d;
  }
  MoveTo(t);
}

void FakeClock::Set(absl::Time t) { MoveTo(t); }

void FakeClock::MoveTo(absl::Time t) {
  std::vector<Waiter*> due;
  {
    absl::MutexLock lock(&mu_);
    now_ = t;
    for (Waiter* w : waiters_) {
      if (w->reached.load() || w->deadline > now_) continue;
      w->reached.store(true);
      ++w->wakers;
      due.push_back(w);
    }
  }
  // Not under mu_: the waiters call Now() with their own mutex held.
  for (Waiter* w : due) {
    // Releasing the waiter's mutex makes absl evaluate its condition again, which now holds.
    w->mu->Lock();
    w->mu->Unlock();
    absl::MutexLock lock(&mu_);
    --w->wakers;  // the last touch of `w`
  }
}

bool FakeClock::AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond,
                                  absl::Time deadline) {
  if (cond.Eval()) return true;
  Waiter w{.mu = &mu, .deadline = deadline};
  {
    absl::MutexLock lock(&mu_);
    if (now_ >= deadline) return false;
    waiters_.push_back(&w);
  }
  struct Either {
    const absl::Condition* cond;
    const Waiter* w;
    bool operator()() const { return w->reached.load() || cond->Eval(); }
  } either{&cond, &w};
  mu.Await(absl::Condition(&either));

  bool woken_by_move;
  {
    absl::MutexLock lock(&mu_);
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &w));
    woken_by_move = w.wakers > 0;
  }
  if (woken_by_move) {
    // A move is about to lock `mu` to wake this thread: let it through before `w` goes away.
    mu.Unlock();
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Waiter* waiter) { return waiter->wakers == 0; }, &w));
    }
    mu.Lock();
  }
  return cond.Eval();
}

size_t FakeClock::PendingWaiters() const {
  return static_cast<size_t>(std::count_if(waiters_.begin(), waiters_.end(),
                                           [](const Waiter* w) { return !w->reached.load(); }));
}

size_t FakeClock::waiters() const {
  absl::MutexLock lock(&mu_);
  return PendingWaiters();
}

bool FakeClock::AwaitWaiters(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return PendingWaiters() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

absl::Time TickAtOrBefore(absl::Time t, absl::Duration period, absl::Duration offset) {
  const int64_t p = std::max<int64_t>(1, absl::ToInt64Nanoseconds(period));
  const int64_t o = absl::ToInt64Nanoseconds(offset);
  const int64_t n = absl::ToUnixNanos(t);
  return absl::FromUnixNanos(n - (((n - o) % p) + p) % p);
}

absl::Time TickAfter(absl::Time t, absl::Duration period, absl::Duration offset) {
  return TickAtOrBefore(t, period, offset) +
         absl::Nanoseconds(std::max<int64_t>(1, absl::ToInt64Nanoseconds(period)));
}

}  // namespace tessera
