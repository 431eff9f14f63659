#include "scheduler/service/lease_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::scheduler {

LeaseTable::LeaseTable(std::shared_ptr<Clock> clock, LeaseTerms terms)
    : clock_(std::move(clock)), terms_(terms) {}

void LeaseTable::Grant(const std::string& node) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  leases_[node] = Lease{now, false, true};
}

absl::Status LeaseTable::Renew(const std::string& node) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto it = leases_.find(node);
  if (it == leases_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node, " holds no lease from this scheduler; register again"));
  }
  if (it->second.revoked) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node, " was declared lost; register again"));
  }
  it->second.renewed = now;
  it->second.heard = true;
  return absl::OkStatus();
}

void LeaseTable::Adopt(const std::vector<std::string>& online) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  for (const auto& node : online) leases_.try_emplace(node, Lease{now, false});
}

void LeaseTable::Clear() {
  absl::MutexLock lock(&mu_);
  leases_.clear();
}

std::vector<ExpiredLease> LeaseTable::Expired() const {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  std::vector<ExpiredLease> out;
  for (const auto& [node, l] : leases_) {
    if (!l.revoked && now - l.renewed >= LengthOf(l)) out.push_back({node, now - l.renewed});
  }
  std::sort(out.begin(), out.end(),
            [](const ExpiredLease& a, const ExpiredLease& b) { return a.node < b.node; });
  return out;
}

absl::Duration LeaseTable::UntilNextExpiry() const {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  absl::Duration soonest = absl::InfiniteDuration();
  for (const auto& [node, l] : leases_) {
    const absl::Duration left = l.renewed + LengthOf(l) - now;
    if (!l.revoked && left > absl::ZeroDuration() && left < soonest) soonest = left;
  }
  return soonest;
}

void LeaseTable::Revoke(const std::string& node) {
  absl::MutexLock lock(&mu_);
  leases_[node].revoked = true;
}

bool LeaseTable::Holds(const std::string& node) const {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto it = leases_.find(node);
  return it != leases_.end() && !it->second.revoked &&
         now - it->second.renewed < LengthOf(it->second);
}

absl::Duration LeaseTable::UntilFenced(const std::string& node) const {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto it = leases_.find(node);
  if (it == leases_.end() || !it->second.revoked) return absl::ZeroDuration();
  return std::max(absl::ZeroDuration(), it->second.renewed + terms_.fence - now);
}

std::vector<std::string> LeaseTable::Suspected() const {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [node, l] : leases_) {
    const absl::Duration silent = now - l.renewed;
    // An ended lease not yet declared lost (its store write failed) is suspect too.
    if (!l.revoked && ((l.heard && silent >= terms_.suspect) || silent >= LengthOf(l))) {
      out.push_back(node);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tessera::scheduler
