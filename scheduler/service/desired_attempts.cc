#include "scheduler/service/desired_attempts.h"

#include <set>
#include <utility>

namespace tessera::scheduler {

DesiredAttempts::DesiredAttempts(std::shared_ptr<Clock> clock, absl::Duration resend_after)
    : clock_(std::move(clock)), resend_after_(resend_after) {}

void DesiredAttempts::StartSent(const std::string& node, const v1::StartAttempt& start,
                                bool delivered) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  starts_[{node, start.run_id(), start.resumption_index()}] =
      Pending{start, delivered ? now : absl::InfinitePast()};
}

std::vector<v1::StartAttempt> DesiredAttempts::StartsDue(const std::string& node,
                                                         const v1::Heartbeat& hb) {
  std::set<std::pair<std::string, int>> listed;
  for (const auto& a : hb.attempts()) listed.emplace(a.run_id(), a.resumption_index());
  const absl::Time now = clock_->Now();
  std::vector<v1::StartAttempt> due;
  absl::MutexLock lock(&mu_);
  for (auto it = starts_.lower_bound({node, "", 0}); it != starts_.end();) {
    const auto& [n, run_id, resumption] = it->first;
    if (n != node) break;
    if (listed.count({run_id, resumption})) {
      it = starts_.erase(it);  // it arrived
      continue;
    }
    if (now - it->second.sent_at >= resend_after_) {
      it->second.sent_at = now;
      due.push_back(it->second.start);
    }
    ++it;
  }
  // Stops of attempts the node no longer lists at all have done their work.
  for (auto it = stops_.lower_bound({node, "", 0});
       it != stops_.end() && std::get<0>(it->first) == node;) {
    if (listed.count({std::get<1>(it->first), std::get<2>(it->first)})) {
      ++it;
    } else {
      it = stops_.erase(it);
    }
  }
  return due;
}

void DesiredAttempts::Forget(const std::string& run_id, int resumption) {
  absl::MutexLock lock(&mu_);
  std::erase_if(starts_, [&](const auto& e) {
    return std::get<1>(e.first) == run_id && std::get<2>(e.first) == resumption;
  });
  std::erase_if(stops_, [&](const auto& e) {
    return std::get<1>(e.first) == run_id && std::get<2>(e.first) == resumption;
  });
}

bool DesiredAttempts::StopDue(const std::string& node, const std::string& run_id, int resumption) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = stops_.try_emplace({node, run_id, resumption}, now);
  if (inserted) return true;
  if (now - it->second < resend_after_) return false;
  it->second = now;
  return true;
}

}  // namespace tessera::scheduler
