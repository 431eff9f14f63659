#include "base/rate_budgets.h"

#include <algorithm>

namespace tessera {
namespace {

constexpr char kOverflow[] = "(others)";

}  // namespace

RateBudgets::RateBudgets(std::shared_ptr<Clock> clock, double per_second, double burst,
                         size_t max_keys)
    : clock_(std::move(clock)), max_keys_(max_keys), per_second_(per_second), burst_(burst) {}

void RateBudgets::Reset(double per_second, double burst) {
  absl::MutexLock lock(&mu_);
  per_second_ = per_second;
  burst_ = burst;
  budgets_.clear();
}

double RateBudgets::per_second() const {
  absl::MutexLock lock(&mu_);
  return per_second_;
}

RateBudgets::Budget& RateBudgets::Refilled(const std::string& key) {
  const absl::Time now = clock_->Now();
  auto it = budgets_.find(key);
  if (it == budgets_.end()) {
    if (budgets_.size() >= max_keys_) {
      // Full budgets tell nothing a new one would not: drop them first.
      absl::erase_if(budgets_, [&](const auto& entry) {
        const Budget& b = entry.second;
        return b.left + absl::ToDoubleSeconds(now - b.at) * per_second_ >= burst_;
      });
    }
    const std::string& slot = budgets_.size() >= max_keys_ ? kOverflow : key;
    it = budgets_.try_emplace(slot, Budget{burst_, now}).first;
  }
  Budget& b = it->second;
  b.left = std::min(burst_, b.left + absl::ToDoubleSeconds(now - b.at) * per_second_);
  b.at = now;
  return b;
}

absl::Duration RateBudgets::Wait(const Budget& b) const {
  if (b.left >= 1) return absl::ZeroDuration();
  return absl::Seconds((1 - b.left) / per_second_);
}

absl::Duration RateBudgets::WaitFor(const std::string& key) {
  absl::MutexLock lock(&mu_);
  if (per_second_ <= 0) return absl::ZeroDuration();
  return Wait(Refilled(key));
}

void RateBudgets::Spend(const std::string& key) {
  absl::MutexLock lock(&mu_);
  if (per_second_ <= 0) return;
  Budget& b = Refilled(key);
  b.left = std::max(0.0, b.left - 1);
}

absl::Duration RateBudgets::TrySpend(const std::string& key) {
  absl::MutexLock lock(&mu_);
  if (per_second_ <= 0) return absl::ZeroDuration();
  Budget& b = Refilled(key);
  const absl::Duration wait = Wait(b);
  if (wait == absl::ZeroDuration()) b.left -= 1;
  return wait;
}

}  // namespace tessera
