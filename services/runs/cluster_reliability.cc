#include "services/runs/cluster_reliability.h"

#include <algorithm>

namespace tessera::runs {

bool IsHardwareInterruption(v1::AttemptEndReason reason) {
  return reason == v1::ATTEMPT_END_REASON_NODE_FAILURE ||
         reason == v1::ATTEMPT_END_REASON_GPU_FAULT || reason == v1::ATTEMPT_END_REASON_HANG ||
         reason == v1::ATTEMPT_END_REASON_STRAGGLER;
}

ReliabilityFigures ReliabilityOf(const std::vector<store::AttemptUsage>& attempts, absl::Time since,
                                 absl::Time until) {
  ReliabilityFigures f;
  f.window_days = absl::ToDoubleHours(until - since) / 24;
  for (const auto& a : attempts) {
    const absl::Time from = std::max(a.started_at, since);
    const absl::Time to = std::min(a.ended_at, until);
    if (to > from) f.gpu_hours += a.gpus * absl::ToDoubleHours(to - from);
    if (IsHardwareInterruption(a.end_reason) && a.ended_at >= since && a.ended_at < until) {
      ++f.interruptions;
    }
  }
  return f;
}

ClusterReliability::ClusterReliability(std::shared_ptr<store::UsageStore> usage,
                                       std::shared_ptr<Clock> clock, absl::Duration window,
                                       absl::Duration refresh)
    : usage_(std::move(usage)), clock_(std::move(clock)), window_(window), refresh_(refresh) {}

absl::StatusOr<ReliabilityFigures> ClusterReliability::Figures() {
  const absl::Time now = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    if (figures_ && now - read_at_ < refresh_) return *figures_;
    // One caller reads; the others keep the figures they had meanwhile.
    if (figures_) read_at_ = now;
  }
  auto attempts = usage_->ListAttemptUsage(now - window_, now);
  absl::MutexLock lock(&mu_);
  if (!attempts.ok()) {
    if (figures_) return *figures_;  // a minute older is better than none
    return attempts.status();
  }
  figures_ = ReliabilityOf(*attempts, now - window_, now);
  read_at_ = now;
  return *figures_;
}

void ClusterReliability::SetRunningGoodput(std::optional<double> goodput) {
  absl::MutexLock lock(&mu_);
  running_goodput_ = goodput;
}

std::optional<double> ClusterReliability::running_goodput() const {
  absl::MutexLock lock(&mu_);
  return running_goodput_;
}

}  // namespace tessera::runs
