#pragma once
// A token bucket per key (a user, an address): each key's budget refills at `per_second` up to
// `burst`, and a key that has spent it waits for it to refill. Used where one caller must not
// crowd out the rest: failed key lookups per address (auth/unknown_key_limiter.h), runs submitted
// per user (runs/run_admission.h). Time comes from the injected clock, so tests step it exactly.
// At most `max_keys` are tracked; past it, full budgets are forgotten first, and then new keys
// share one budget (never a fresh one each).
#include <cstddef>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera {

class RateBudgets {
 public:
  // per_second <= 0: no limit (every call admitted).
  RateBudgets(std::shared_ptr<Clock> clock, double per_second, double burst,
              size_t max_keys = 100'000);

  // Changes the rate and burst, forgetting every budget.
  void Reset(double per_second, double burst);
  double per_second() const;

  // Zero when `key` has at least one left now; else how long until it has.
  absl::Duration WaitFor(const std::string& key);
  // Spends one of `key`'s budget (down to zero, never below).
  void Spend(const std::string& key);
  // Spends one when there is one: zero; else spends nothing and returns the wait, as WaitFor.
  absl::Duration TrySpend(const std::string& key);

 private:
  struct Budget {
    double left = 0;
    absl::Time at;
  };
  // The budget of `key` refilled to now (a new one full).
  Budget& Refilled(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration Wait(const Budget& b) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Clock> clock_;
  const size_t max_keys_;
  mutable absl::Mutex mu_;
  double per_second_ ABSL_GUARDED_BY(mu_);
  double burst_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Budget> budgets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera
