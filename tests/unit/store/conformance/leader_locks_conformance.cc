// Leader locks: one holder of a role at a time, standbys that take over when it lets go or its
// session ends.
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace {

constexpr std::string_view kRole = kSchedulerLeaderRole;

// True when `instance` holds `role`, failing the case when the store cannot tell.
bool Acquire(LeaderLockStore& locks, std::string_view instance, std::string_view role = kRole) {
  absl::StatusOr<bool> got = locks.TryAcquire(role, instance);
  REQUIRE(got.ok());
  return *got;
}

CONFORMANCE_CASE("leader locks: one holder at a time; the others are refused") {
  Stores s = FreshStores();
  LeaderLockStore& locks = *s.leader_locks;
  CHECK(absl::IsFailedPrecondition(locks.CheckHeld(kRole, "a")));  // nothing taken yet

  CHECK(Acquire(locks, "a"));
  CHECK(locks.CheckHeld(kRole, "a").ok());
  CHECK_FALSE(Acquire(locks, "b"));
  CHECK_FALSE(Acquire(locks, "c"));
  CHECK(absl::IsFailedPrecondition(locks.CheckHeld(kRole, "b")));
  // A refusal takes nothing from the holder.
  CHECK(locks.CheckHeld(kRole, "a").ok());
}

CONFORMANCE_CASE("leader locks: the holder may ask again, and one release is enough") {
  Stores s = FreshStores();
  LeaderLockStore& locks = *s.leader_locks;
  REQUIRE(Acquire(locks, "a"));
  CHECK(Acquire(locks, "a"));
  CHECK(Acquire(locks, "a"));
  CHECK(locks.CheckHeld(kRole, "a").ok());
  CHECK_FALSE(Acquire(locks, "b"));

  // Asking again does not stack holds: a single release frees the role.
  REQUIRE(locks.Release(kRole, "a").ok());
  CHECK(Acquire(locks, "b"));
}

CONFORMANCE_CASE("leader locks: a release lets a standby take the role at once") {
  Stores s = FreshStores();
  LeaderLockStore& locks = *s.leader_locks;
  REQUIRE(Acquire(locks, "a"));
  REQUIRE_FALSE(Acquire(locks, "b"));

  REQUIRE(locks.Release(kRole, "a").ok());
  CHECK(absl::IsFailedPrecondition(locks.CheckHeld(kRole, "a")));
  CHECK(Acquire(locks, "b"));
  CHECK(locks.CheckHeld(kRole, "b").ok());
  CHECK_FALSE(Acquire(locks, "a"));  // the former holder is a standby now

  // Releasing a role one does not hold, or never asked for, changes nothing.
  CHECK(locks.Release(kRole, "a").ok());
  CHECK(locks.Release(kRole, "never-seen").ok());
  CHECK(locks.CheckHeld(kRole, "b").ok());
}

CONFORMANCE_CASE("leader locks: roles are independent") {
  Stores s = FreshStores();
  LeaderLockStore& locks = *s.leader_locks;
  REQUIRE(Acquire(locks, "a", kRole));
  CHECK(Acquire(locks, "b", "health"));
  CHECK_FALSE(Acquire(locks, "a", "health"));
  CHECK_FALSE(Acquire(locks, "b", kRole));

  REQUIRE(locks.Release("health", "b").ok());
  CHECK(locks.CheckHeld(kRole, "a").ok());
  CHECK(Acquire(locks, "a", "health"));
}

CONFORMANCE_CASE("leader locks: a holder whose session ends loses the role") {
  Stores s = FreshStores();
  LeaderLockStore& locks = *s.leader_locks;
  REQUIRE(Acquire(locks, "a"));
  REQUIRE_FALSE(Acquire(locks, "b"));

  EndLeaderSession(kRole, "a");
  CHECK_FALSE(locks.CheckHeld(kRole, "a").ok());
  CHECK(Acquire(locks, "b"));
  CHECK(locks.CheckHeld(kRole, "b").ok());
  // Back, the former holder finds the role taken.
  absl::StatusOr<bool> again = locks.TryAcquire(kRole, "a");
  CHECK((!again.ok() || !*again));
  CHECK(locks.CheckHeld(kRole, "b").ok());
}

CONFORMANCE_CASE("leader locks: instances of separate processes contend over one database") {
  Stores first = FreshStores();
  {
    Stores second = SameDatabaseStores();
    REQUIRE(Acquire(*second.leader_locks, "b"));
    CHECK_FALSE(Acquire(*first.leader_locks, "a"));
    CHECK(absl::IsFailedPrecondition(first.leader_locks->CheckHeld(kRole, "b")));
    // The second process goes away while it holds the role: its sessions end with it.
  }
  CHECK(Acquire(*first.leader_locks, "a"));

  Stores third = SameDatabaseStores();
  CHECK_FALSE(Acquire(*third.leader_locks, "c"));
  REQUIRE(first.leader_locks->Release(kRole, "a").ok());
  CHECK(Acquire(*third.leader_locks, "c"));
}

}  // namespace
}  // namespace tessera::store::conformance
