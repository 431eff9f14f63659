#include "services/common/auth/unknown_key_limiter.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace tessera::auth {

UnknownKeyLimiter::UnknownKeyLimiter(std::shared_ptr<Clock> clock, double per_second)
    : budgets_(std::move(clock), per_second, per_second * 10, kMaxAddresses) {}

void UnknownKeyLimiter::set_per_second(double per_second) {
  budgets_.Reset(per_second, per_second * 10);
}

absl::Status UnknownKeyLimiter::Admit(const std::string& address) {
  const absl::Duration wait = budgets_.WaitFor(address);
  if (wait == absl::ZeroDuration()) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "too many unknown API keys from %s (at most %g a second, tessera-server "
      "--max-unknown-keys-per-address); its next key is looked up in %.1f s",
      address.substr(0, 128), budgets_.per_second(), std::max(absl::ToDoubleSeconds(wait), 0.1)));
}

void UnknownKeyLimiter::Failed(const std::string& address) { budgets_.Spend(address); }

}  // namespace tessera::auth
