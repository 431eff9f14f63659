// Leader locks: one holder of a role at a time, standbys that take over when it lets go or its
// session ends.
#include <optional>

#include "absl/strings/match.h"
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace leader_locks_conformance {

constexpr std::string_view kRole = kSchedulerLeaderRole;

// The epoch of the term when `instance` holds `role`, failing the case when the store cannot
// tell.
std::optional<int64_t> Term(LeaderLockStore& locks, std::string_view instance,
                            std::string_view role = kRole) {
  absl::StatusOr<std::optional<int64_t>> got = locks.TryAcquire(role, instance);
  REQUIRE(got.ok());
  return *got;
}

// True when `instance` holds `role`.
bool Acquire(LeaderLockStore& locks, std::string_view instance, std::string_view role = kRole) {
  return Term(locks, instance, role).has_value();
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
  absl::StatusOr<std::optional<int64_t>> again = locks.TryAcquire(kRole, "a");
  CHECK((!again.ok() || !again->has_value()));
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

CONFORMANCE_CASE("leader terms: every new holder begins a higher term, asking again keeps it") {
  Stores s = FreshStores();
  LeaderLockStore& locks = *s.leader_locks;
  const std::optional<int64_t> first = Term(locks, "a");
  REQUIRE(first.has_value());
  CHECK(Term(locks, "a") == first);  // confirming is not a new term
  CHECK_FALSE(Term(locks, "b").has_value());

  REQUIRE(locks.Release(kRole, "a").ok());
  const std::optional<int64_t> second = Term(locks, "b");
  REQUIRE(second.has_value());
  CHECK(*second > *first);
  EndLeaderSession(kRole, "b");
  const std::optional<int64_t> third = Term(locks, "a");
  REQUIRE(third.has_value());
  CHECK(*third > *second);
  // Each role counts its own terms.
  const std::optional<int64_t> health = Term(locks, "b", kHealthLeaderRole);
  REQUIRE(health.has_value());
  CHECK(Term(locks, "a") == third);
}

CONFORMANCE_CASE("fenced writes: the current term's land, an ended term's change nothing") {
  Stores s = FreshStores();
  LeaderLockStore& locks = *s.leader_locks;
  const std::optional<int64_t> old_term = Term(locks, "a");
  REQUIRE(old_term.has_value());
  const WriteFence old_fence{std::string(kRole), *old_term};
  auto node = s.nodes->CreateNode(MakeNode("n1"), old_fence);
  REQUIRE(node.ok());
  REQUIRE(s.runs->CreateRun(MakeRun("r1", 1), {}).ok());
  auto run = s.runs->GetRun("r1");
  REQUIRE(run.ok());

  // "a" is demoted (its session ended while it was frozen) and "b" leads a newer term.
  EndLeaderSession(kRole, "a");
  const std::optional<int64_t> new_term = Term(locks, "b");
  REQUIRE(new_term.has_value());

  v1::Node lost = *node;
  lost.set_liveness(v1::NODE_LIVENESS_LOST);
  auto refused = s.nodes->UpdateNode(lost, node->version(), {}, old_fence);
  CHECK(IsStaleTerm(refused.status()));
  CHECK(absl::StrContains(refused.status().message(), "has ended"));
  CHECK(IsStaleTerm(s.nodes->CreateNode(MakeNode("n2"), old_fence).status()));
  v1::Run running = *run;
  running.set_status(v1::RUN_STATUS_RUNNING);
  CHECK(IsStaleTerm(s.runs->UpdateRun(running, run->version(), {}, {}, old_fence).status()));
  // Nothing of it was stored.
  CHECK(s.nodes->GetNode("n1")->liveness() == v1::NODE_LIVENESS_ONLINE);
  CHECK(absl::IsNotFound(s.nodes->GetNode("n2").status()));
  CHECK(s.runs->GetRun("r1")->status() == v1::RUN_STATUS_QUEUED);

  // The new term's writes land, and unfenced writes (people, other services) are not affected.
  const WriteFence new_fence{std::string(kRole), *new_term};
  auto updated = s.nodes->UpdateNode(lost, node->version(), {}, new_fence);
  REQUIRE(updated.ok());
  CHECK(s.runs->UpdateRun(running, run->version(), {}, {}, new_fence).ok());
  CHECK(s.nodes->UpdateNode(*updated, updated->version(), {}).ok());
  // A role nobody ever led refuses every fenced write.
  CHECK(IsStaleTerm(s.nodes->CreateNode(MakeNode("n3"), WriteFence{"never-led-role", 1}).status()));
}

}  // namespace leader_locks_conformance
}  // namespace tessera::store::conformance
