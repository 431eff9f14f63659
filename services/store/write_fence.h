#pragma once
// A fencing token: the leadership term a write is made in. A store refuses a fenced write, in the
// write's own transaction, unless `epoch` is still the role's current term, so a leader that was
// demoted while it was frozen or cut off cannot change anything when it resumes.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera::store {

struct WriteFence {
  std::string role;   // e.g. kSchedulerLeaderRole
  int64_t epoch = 0;  // the term the writer leads in (from LeaderLockStore::TryAcquire)
};

// Where a leader's writes get their fence: the current term's, nullopt for unfenced writes, or
// an error when the writer does not lead now (LeaderElection::Fence).
using FenceSource = std::function<absl::StatusOr<std::optional<WriteFence>>()>;

// The refusal of a write whose term has ended. FAILED_PRECONDITION: retrying cannot help, the
// writer must step down.
inline absl::Status StaleTermError(const WriteFence& fence, std::optional<int64_t> current) {
  return absl::FailedPreconditionError(absl::StrCat(
      "stale leadership term: the ", fence.role, " term ", fence.epoch, " has ended (",
      current ? absl::StrCat("the current term is ", *current) : std::string("no term was begun"),
      "); this instance is no longer the leader and its write was refused"));
}

inline bool IsStaleTerm(const absl::Status& st) {
  return absl::IsFailedPrecondition(st) && absl::StrContains(st.message(), "stale leadership term");
}

}  // namespace tessera::store
