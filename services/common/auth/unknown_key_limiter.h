#pragma once
// How many keys the services do not know one address may make them look up. A key the
// authenticator has not cached costs a database lookup; an address trying made-up keys could
// make every one of its calls such a lookup, and hold the database's connections for itself.
// Each address has a budget of failed lookups (an unknown, revoked or expired key) that refills
// at `per_second` up to `burst`; an address that has spent it gets RESOURCE_EXHAUSTED for any key
// that is not cached, until the budget refills, without a lookup. Valid keys never spend the
// budget, so a cluster of 10,000 nodes registering at once behind one address is never refused.
// A key already cached answers as before: a refused address's own working keys keep working.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "base/clock.h"
#include "base/rate_budgets.h"

namespace tessera::auth {

class UnknownKeyLimiter {
 public:
  // per_second <= 0: no limit. The burst is ten seconds' worth.
  UnknownKeyLimiter(std::shared_ptr<Clock> clock, double per_second);

  void set_per_second(double per_second);
  // OK when `address` may have one more key looked up now.
  absl::Status Admit(const std::string& address);
  // A lookup for `address` found no valid key: one of its budget is spent.
  void Failed(const std::string& address);

  // Addresses tracked at most; past it, new addresses share one budget (an attacker with many
  // addresses gets one address's budget for all of them, never a fresh one).
  static constexpr size_t kMaxAddresses = 100'000;

 private:
  RateBudgets budgets_;
};

}  // namespace tessera::auth
