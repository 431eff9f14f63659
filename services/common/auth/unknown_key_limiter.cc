#include "services/common/auth/unknown_key_limiter.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::auth {
namespace {

constexpr char kOverflow[] = "(other addresses)";

}  // namespace

UnknownKeyLimiter::UnknownKeyLimiter(std::shared_ptr<Clock> clock, double per_second)
    : clock_(std::move(clock)), per_second_(per_second) {}

void UnknownKeyLimiter::set_per_second(double per_second) {
  absl::MutexLock lock(&mu_);
  per_second_ = per_second;
  budgets_.clear();
}

UnknownKeyLimiter::Budget& UnknownKeyLimiter::Refilled(const std::string& address, absl::Time now) {
  auto it = budgets_.find(address);
  if (it == budgets_.end()) {
    if (budgets_.size() >= kMaxAddresses) {
      // Full budgets tell nothing a new one would not: drop them first.
      absl::erase_if(budgets_, [&](const auto& entry) {
        const Budget& b = entry.second;
        return b.left + absl::ToDoubleSeconds(now - b.at) * per_second_ >= burst();
      });
    }
    const std::string& key = budgets_.size() >= kMaxAddresses ? kOverflow : address;
    it = budgets_.try_emplace(key, Budget{burst(), now}).first;
  }
  Budget& b = it->second;
  b.left = std::min(burst(), b.left + absl::ToDoubleSeconds(now - b.at) * per_second_);
  b.at = now;
  return b;
}

absl::Status UnknownKeyLimiter::Admit(const std::string& address) {
  absl::MutexLock lock(&mu_);
  if (per_second_ <= 0) return absl::OkStatus();
  const Budget& b = Refilled(address, clock_->Now());
  if (b.left >= 1) return absl::OkStatus();
  const double wait = (1 - b.left) / per_second_;
  return absl::ResourceExhaustedError(
      absl::StrFormat("too many unknown API keys from %s (at most %g a second, tessera-server "
                      "--max-unknown-keys-per-address); its next key is looked up in %.1f s",
                      address.substr(0, 128), per_second_, std::max(wait, 0.1)));
}

void UnknownKeyLimiter::Failed(const std::string& address) {
  absl::MutexLock lock(&mu_);
  if (per_second_ <= 0) return;
  Budget& b = Refilled(address, clock_->Now());
  b.left = std::max(0.0, b.left - 1);
}

}  // namespace tessera::auth
