// Leader election with terms: who leads, the epoch each term's writes carry, and stepping down
// on a missed deadline, all on a fake clock over the in-memory store.
#include "services/common/leader_election.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "services/store/fenced_node_store.h"
#include "services/store/memory/memory_database.h"

namespace tessera {
namespace leader_election_test {

constexpr char kRole[] = "scheduler";

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<store::MemoryDatabase> db = std::make_shared<store::MemoryDatabase>();
  store::Stores stores = store::MakeMemoryStores(db);

  std::shared_ptr<LeaderElection> Elect(const std::string& instance) {
    return std::make_shared<LeaderElection>(
        stores.leader_locks, kRole, instance, clock,
        LeaderElectionOptions{.term_timeout = absl::Seconds(4),
                              .session_timeout = absl::Seconds(5)});
  }
  v1::Node Node(const std::string& name) {
    v1::Node n;
    n.set_name(name);
    n.set_liveness(v1::NODE_LIVENESS_ONLINE);
    return n;
  }
};

TEST_CASE("leader election: one leads a term, the fence carries its epoch, a standby waits") {
  Fixture f;
  auto a = f.Elect("a");
  auto b = f.Elect("b");
  CHECK_FALSE(a->IsLeader());  // nothing asked yet
  CHECK_FALSE(a->KeepsWorkers());
  CHECK(absl::IsUnavailable(a->Fence().status()));

  REQUIRE(a->Lead());
  CHECK(a->IsLeader());
  CHECK(a->KeepsWorkers());
  CHECK(a->epoch() > 0);
  auto fence = a->Fence();
  REQUIRE(fence.ok());
  REQUIRE(fence->has_value());
  CHECK((*fence)->role == kRole);
  CHECK((*fence)->epoch == a->epoch());

  CHECK_FALSE(b->Lead());
  CHECK_FALSE(b->IsLeader());
  CHECK_FALSE(b->KeepsWorkers());
  CHECK(b->epoch() == 0);
  // Confirming keeps the term.
  const int64_t term = a->epoch();
  f.clock->Advance(absl::Seconds(1));
  REQUIRE(a->Lead());
  CHECK(a->epoch() == term);
}

TEST_CASE(
    "leader election: a holder past its deadline leads no more, steps down, and the "
    "standby's term fences its writes") {
  Fixture f;
  auto a = f.Elect("a");
  auto b = f.Elect("b");
  REQUIRE(a->Lead());
  const auto old_fence = **a->Fence();
  auto a_nodes = store::MakeFencedNodeStore(f.stores.nodes, [a] { return a->Fence(); });
  REQUIRE(a_nodes->CreateNode(f.Node("n1")).ok());

  // Frozen: no confirmation for longer than the term timeout. Before any of its threads asks
  // the store, it knows it does not lead, so it writes nothing.
  f.clock->Advance(absl::Seconds(4));
  CHECK_FALSE(a->IsLeader());
  // No other instance can lead before its session times out (5 s): the workers' streams stay
  // meanwhile, though its beat is late.
  CHECK(a->KeepsWorkers());
  f.clock->Advance(absl::Milliseconds(999));
  CHECK(a->KeepsWorkers());
  auto refused = a_nodes->CreateNode(f.Node("n2"));
  CHECK(absl::IsUnavailable(refused.status()));
  CHECK(absl::StrContains(refused.status().message(), "does not lead"));
  CHECK(absl::IsNotFound(f.stores.nodes->GetNode("n2").status()));

  // Its next beat steps down and gives the role up even though the store would still confirm.
  // Until it learns of another leader it keeps its workers (answering heartbeats only).
  CHECK_FALSE(a->Lead());
  CHECK(a->KeepsWorkers());
  CHECK(b->Lead());
  CHECK(b->epoch() > old_fence.epoch);
  // A write stamped with the old term (in flight while it froze) is refused by the store.
  auto n1 = f.stores.nodes->GetNode("n1");
  REQUIRE(n1.ok());
  CHECK(store::IsStaleTerm(f.stores.nodes->UpdateNode(*n1, n1->version(), {}, old_fence).status()));
  // "a" is a standby now: on its next beat it sees the new holder and lets its workers go.
  CHECK_FALSE(a->Lead());
  CHECK_FALSE(a->KeepsWorkers());
  CHECK(b->IsLeader());
}

TEST_CASE(
    "leader election: a beat held up past the session timeout lets the workers go, since a "
    "standby may lead") {
  Fixture f;
  auto a = f.Elect("a");
  auto b = f.Elect("b");
  REQUIRE(a->Lead());
  // Its beat never comes (the cycle that runs before it hangs), so it cannot learn that "b"
  // took over once the store ended its idle session; "b" would declare lost every node that
  // stayed with "a".
  f.clock->Advance(absl::Milliseconds(4999));
  CHECK(a->KeepsWorkers());
  f.clock->Advance(absl::Milliseconds(1));
  CHECK_FALSE(a->KeepsWorkers());
  f.db->EndLeaderSession(kRole, "a");
  CHECK(b->Lead());
  CHECK_FALSE(a->KeepsWorkers());
  // When the beat comes at last it steps down, and sees "b" lead at the next one.
  CHECK_FALSE(a->Lead());
  CHECK_FALSE(a->Lead());
  CHECK_FALSE(a->KeepsWorkers());
  CHECK(b->IsLeader());
}

TEST_CASE(
    "leader election: a hold the store no longer confirms ends the term at once, the "
    "workers stay while no one else can lead") {
  Fixture f;
  auto a = f.Elect("a");
  REQUIRE(a->Lead());
  const int64_t first = a->epoch();
  f.db->SetUnavailable(true);  // the lock's session breaks with the database
  CHECK_FALSE(a->Lead());
  CHECK_FALSE(a->IsLeader());
  CHECK(a->epoch() == 0);
  CHECK(absl::IsUnavailable(a->Fence().status()));
  // However long the database is away, the workers' streams stay (and heartbeats answered).
  for (int beat = 0; beat < 10; ++beat) {
    f.clock->Advance(absl::Seconds(30));
    CHECK_FALSE(a->Lead());
    CHECK(a->KeepsWorkers());
  }
  f.db->SetUnavailable(false);
  REQUIRE(a->Lead());  // back: a new term
  CHECK(a->epoch() > first);
  CHECK(a->KeepsWorkers());
}

TEST_CASE("leader election: without a lock store the single instance always leads, unfenced") {
  Fixture f;
  LeaderElection only(nullptr, kRole, "only", f.clock);
  CHECK(only.Lead());
  CHECK(only.IsLeader());
  f.clock->Advance(absl::Hours(1));
  CHECK(only.IsLeader());
  auto fence = only.Fence();
  REQUIRE(fence.ok());
  CHECK_FALSE(fence->has_value());
}

}  // namespace leader_election_test
}  // namespace tessera
