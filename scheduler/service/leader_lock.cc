#include "scheduler/service/leader_lock.h"

#include <spdlog/spdlog.h>

namespace tessera::scheduler {

LeaderLock::LeaderLock(std::shared_ptr<store::LeaderLockStore> locks, std::string instance)
    : locks_(std::move(locks)), instance_(std::move(instance)) {}

LeaderLock::~LeaderLock() {
  if (locks_ == nullptr) return;
  // A standby takes over at once instead of when the database notices this session is gone.
  if (auto st = locks_->Release(store::kSchedulerLeaderRole, instance_); !st.ok()) {
    spdlog::warn("releasing the scheduler leadership: {}", st.ToString());
  }
}

bool LeaderLock::Lead() {
  if (locks_ == nullptr) return true;
  if (held_) {
    const absl::Status st = locks_->CheckHeld(store::kSchedulerLeaderRole, instance_);
    if (st.ok()) return true;
    spdlog::warn("lost the scheduler leadership: {}", std::string(st.message()));
    held_ = false;
    return false;
  }
  // An error (the database is unreachable) counts as a refusal: a standby keeps asking.
  const absl::StatusOr<bool> acquired = locks_->TryAcquire(store::kSchedulerLeaderRole, instance_);
  held_ = acquired.ok() && *acquired;
  if (held_) spdlog::info("this scheduler instance is now the leader");
  return held_;
}

}  // namespace tessera::scheduler
