#pragma once
// Leader election: at most one instance holds a named role at a time. The others are hot
// standbys that take the role over when the holder releases it or its session ends (its process
// died or its connection to the database broke).
//
// An instance's hold lives in a session of its own (for PostgreSQL, a dedicated connection
// holding a session-level advisory lock), so it is lost exactly when that session is: there is
// no lease to renew, and a holder learns of a loss on its next TryAcquire or CheckHeld. The
// session also ends when its holder stops asking (a frozen process): the database closes a
// session idle for longer than the store's session timeout.
//
// Each hold is a term with an epoch, one more than the role's previous term. Writes on the
// leader's behalf carry it as a WriteFence and are refused once a newer term has begun.

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::store {

// The scheduler's role: the instance that holds it runs the scheduling cycle.
inline constexpr std::string_view kSchedulerLeaderRole = "scheduler";
// The health API's role: the instance that holds it sweeps and remediates.
inline constexpr std::string_view kHealthLeaderRole = "health";
// The notifier's role: the instance that holds it plans and delivers notifications.
inline constexpr std::string_view kNotifierLeaderRole = "notifier";

class LeaderLockStore {
 public:
  virtual ~LeaderLockStore() = default;

  // Takes `role` for `instance` when no one holds it. The epoch of the term when `instance`
  // holds it now (a new term when taken now; the same term when held already and its session
  // is alive: asking again is how a holder confirms); nullopt when another instance holds it. An
  // error when the store cannot tell, e.g. the database is unreachable; a holder whose session
  // broke is then no longer the holder. `instance` names one contender; two contenders must not
  // share a name.
  virtual absl::StatusOr<std::optional<int64_t>> TryAcquire(std::string_view role,
                                                            std::string_view instance) = 0;

  // OK when `instance` still holds `role` (its session is alive). Otherwise an error that says
  // why it does not: FAILED_PRECONDITION when it never took the role or released it, UNAVAILABLE
  // when its session just ended (the role is free for others from then on).
  virtual absl::Status CheckHeld(std::string_view role, std::string_view instance) = 0;

  // Gives `role` up when `instance` holds it, so that a standby can take over at once, and ends
  // the instance's session. OK when it did not hold the role.
  virtual absl::Status Release(std::string_view role, std::string_view instance) = 0;
};

}  // namespace tessera::store
