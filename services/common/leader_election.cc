#include "services/common/leader_election.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {

LeaderElection::LeaderElection(std::shared_ptr<store::LeaderLockStore> locks, std::string role,
                               std::string instance, std::shared_ptr<Clock> monotonic,
                               LeaderElectionOptions options)
    : locks_(std::move(locks)),
      role_(std::move(role)),
      instance_(std::move(instance)),
      monotonic_(std::move(monotonic)),
      options_(options) {}

LeaderElection::~LeaderElection() {
  if (locks_ == nullptr) return;
  if (auto st = locks_->Release(role_, instance_); !st.ok()) {
    spdlog::warn("releasing the {} leadership: {}", role_, st.ToString());
  }
}

bool LeaderElection::Lead() {
  if (locks_ == nullptr) return true;
  // Only this (one) caller changes the hold, so it is read here and the store is asked without
  // the lock: a stalled database must never block IsLeader, which worker streams ask.
  bool held;
  absl::Time confirmed_at;
  {
    absl::ReaderMutexLock lock(&mu_);
    held = held_;
    confirmed_at = confirmed_at_;
  }
  const absl::Time asked_at = monotonic_->Now();
  if (held) {
    if (asked_at - confirmed_at >= options_.term_timeout) {
      // Frozen or stalled past the deadline: a standby may lead already. Step down before
      // anything else can act on this term, even if the store would still confirm the hold.
      StepDown(absl::StrCat(
          "its hold was last confirmed ", absl::FormatDuration(asked_at - confirmed_at),
          " ago, past the term timeout of ", absl::FormatDuration(options_.term_timeout)));
      return false;
    }
    const absl::Status st = locks_->CheckHeld(role_, instance_);
    if (st.ok()) {
      // The session was alive when asked, so the store cannot hand the role on before
      // asked_at + its session timeout: counting from asked_at is on the safe side.
      absl::MutexLock lock(&mu_);
      confirmed_at_ = asked_at;
      return true;
    }
    StepDown(std::string(st.message()));
    return false;
  }
  // An error (the database is unreachable) counts as a refusal: a standby keeps asking.
  const absl::StatusOr<std::optional<int64_t>> term = locks_->TryAcquire(role_, instance_);
  if (!term.ok()) return false;
  absl::MutexLock lock(&mu_);
  if (!term->has_value()) {
    if (caretaker_) {
      spdlog::warn("another instance leads the {} role now; {} lets its workers go", role_,
                   instance_);
    }
    caretaker_ = false;
    return false;
  }
  caretaker_ = false;
  held_ = true;
  epoch_ = **term;
  confirmed_at_ = asked_at;
  spdlog::info("this instance ({}) now leads the {} role, term {}", instance_, role_, epoch_);
  return true;
}

void LeaderElection::StepDown(std::string_view why) {
  {
    absl::MutexLock lock(&mu_);
    spdlog::warn("this instance ({}) steps down from the {} role (term {}): {}", instance_, role_,
                 epoch_, std::string(why));
    held_ = false;
    epoch_ = 0;
    caretaker_ = true;
  }
  // End the session: its lock goes now, not when the database notices.
  if (auto st = locks_->Release(role_, instance_); !st.ok()) {
    spdlog::warn("releasing the {} leadership: {}", role_, st.ToString());
  }
}

bool LeaderElection::IsLeaderLocked() const {
  return held_ && monotonic_->Now() - confirmed_at_ < options_.term_timeout;
}

bool LeaderElection::IsLeader() const {
  if (locks_ == nullptr) return true;
  absl::ReaderMutexLock lock(&mu_);
  return IsLeaderLocked();
}

bool LeaderElection::KeepsWorkers() const {
  if (locks_ == nullptr) return true;
  absl::ReaderMutexLock lock(&mu_);
  if (caretaker_) return true;
  // A hold past its deadline that the beat has not yet stepped down from (a scheduling cycle
  // slowed by a loaded database delayed the beat; a stream whose heartbeat came in between was
  // closed as if another instance led) keeps them while no standby can have taken over. A beat
  // stuck for longer (a hung cycle) would never learn of the successor, who would declare every
  // node that stayed here lost: the streams close, and the workers find the new leader.
  return held_ && monotonic_->Now() - confirmed_at_ < options_.session_timeout;
}

int64_t LeaderElection::epoch() const {
  if (locks_ == nullptr) return 0;
  absl::ReaderMutexLock lock(&mu_);
  return IsLeaderLocked() ? epoch_ : 0;
}

absl::StatusOr<std::optional<store::WriteFence>> LeaderElection::Fence() const {
  if (locks_ == nullptr) return std::nullopt;
  absl::ReaderMutexLock lock(&mu_);
  if (!IsLeaderLocked()) {
    return absl::UnavailableError(absl::StrCat("this instance (", instance_, ") does not lead the ",
                                               role_, " role now; nothing written"));
  }
  return store::WriteFence{role_, epoch_};
}

}  // namespace tessera
