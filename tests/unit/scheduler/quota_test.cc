// Team quotas in placement: runs within quota, borrowing idle GPUs, reclaiming them, and the
// reasons a run waits.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "scheduler/placement/placer.h"

namespace tessera::scheduler {
namespace quota_test {

NodeInfo Node(const std::string& name, const std::string& cluster = "c1",
              const std::string& gpu_type = "h100") {
  NodeInfo node;
  node.name = name;
  node.cluster = cluster;
  node.gpu_type = gpu_type;
  node.gpu_count = 8;
  return node;
}

QueuedRun Run(const std::string& id, const std::string& team, int gpus, bool preemptible = false,
              Priority priority = Priority::kMedium, int64_t created = 0) {
  QueuedRun run;
  run.run_id = id;
  run.team = team;
  run.created_at_micros = created;
  run.priority = priority;
  run.preemptible = preemptible;
  run.request.gpus = gpus;
  return run;
}

RunningAllocation Holding(const std::string& id, const std::string& team, const std::string& node,
                          bool preemptible = true, Priority priority = Priority::kMedium) {
  RunningAllocation allocation;
  allocation.run_id = id;
  allocation.team = team;
  allocation.preemptible = preemptible;
  allocation.priority = priority;
  allocation.nodes.push_back(NodeAssignment{node, 0, {0, 1, 2, 3, 4, 5, 6, 7}});
  return allocation;
}

ClusterState TwoTeams(std::vector<RunningAllocation> running = {}) {
  ClusterState state;
  state.nodes = {Node("n1"), Node("n2"), Node("n3"), Node("n4")};
  state.running = std::move(running);
  state.quotas = {{"a", "c1", "", 16}, {"b", "c1", "", 16}};
  return state;
}

TEST_CASE("Quotas: a team takes GPUs up to its quota, then a non-preemptible run waits",
          "[placement][quota]") {
  Placer placer(TwoTeams());
  const PlacementDecision decision =
      placer.PlaceQueue({Run("a1", "a", 8, false, Priority::kMedium, 1),
                         Run("a2", "a", 8, false, Priority::kMedium, 2),
                         Run("a3", "a", 8, false, Priority::kMedium, 3)});
  REQUIRE(decision.placements.size() == 2);
  CHECK_FALSE(decision.placements[0].borrowed);
  CHECK_FALSE(decision.placements[1].borrowed);
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].reason == WaitReason::kQuotaReached);
  CHECK(decision.waiting[0].quota_used == 16);
  CHECK(decision.waiting[0].quota == 16);
  // Two nodes are idle, but none of them for team a.
  CHECK(placer.FreeUnitsFor({}) == 16);
}

TEST_CASE("Quotas: a preemptible run borrows idle GPUs beyond its team's quota",
          "[placement][quota]") {
  Placer placer(TwoTeams({Holding("a1", "a", "n1"), Holding("a2", "a", "n2")}));
  const PlacementDecision decision = placer.PlaceQueue({Run("a3", "a", 16, true)});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].borrowed);
  CHECK(placer.quotas().AnyBorrowing());
}

TEST_CASE("Quotas: a team within its quota takes borrowed GPUs back, whatever the priorities",
          "[placement][quota]") {
  // Team a holds all four nodes: two within its quota, two borrowed, at high priority.
  Placer placer(TwoTeams({Holding("a1", "a", "n1", true, Priority::kHigh),
                          Holding("a2", "a", "n2", true, Priority::kHigh),
                          Holding("a3", "a", "n3", true, Priority::kHigh),
                          Holding("a4", "a", "n4", true, Priority::kHigh)}));
  const PlacementDecision decision =
      placer.PlaceQueue({Run("b1", "b", 16, false, Priority::kLowest)});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].after_preemption);
  CHECK_FALSE(decision.placements[0].borrowed);
  REQUIRE(decision.preemptions.size() == 2);
  for (const Preemption& preemption : decision.preemptions) {
    CHECK(preemption.reclaim);
    CHECK(preemption.for_run_id == "b1");
  }
  // Team a is back at its quota: nothing more may be taken from it.
  CHECK_FALSE(placer.quotas().AnyBorrowing());
  const PlacementDecision next = placer.PlaceQueue({Run("b2", "b", 8, false, Priority::kHigh)});
  CHECK(next.placements.empty());
  REQUIRE(next.waiting.size() == 1);
  CHECK(next.waiting[0].reason == WaitReason::kQuotaReached);
}

TEST_CASE("Quotas: runs that only borrow neither preempt nor reserve", "[placement][quota]") {
  // Team b is at its quota; a higher-priority preemptible run of b may not evict team a's
  // lower-priority runs to borrow.
  Placer placer(TwoTeams({Holding("a1", "a", "n1", true, Priority::kLowest),
                          Holding("a2", "a", "n2", true, Priority::kLowest),
                          Holding("b1", "b", "n3", false), Holding("b2", "b", "n4", false)}));
  const PlacementDecision decision = placer.PlaceQueue({Run("b3", "b", 8, true, Priority::kHigh)});
  CHECK(decision.preemptions.empty());
  CHECK(decision.reservations.empty());
  CHECK(decision.placements.empty());
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].reason == WaitReason::kWaitingToBorrow);
  CHECK(decision.waiting[0].quota_used == 16);
}

TEST_CASE("Quotas: reclaiming takes only from teams over their quota", "[placement][quota]") {
  ClusterState state = TwoTeams({Holding("a1", "a", "n1"), Holding("a2", "a", "n2"),
                                 Holding("a3", "a", "n3"), Holding("b1", "b", "n4")});
  state.quotas = {{"a", "c1", "", 48}, {"b", "c1", "", 0}, {"c", "c1", "", 16}};
  Placer placer(state);
  // c may take b's borrowed node back, but needs two nodes, and a is within its quota.
  const PlacementDecision decision = placer.PlaceQueue({Run("c1", "c", 16)});
  CHECK(decision.preemptions.empty());
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].reason == WaitReason::kHoldsReservation);
  // One node is enough: b's.
  const PlacementDecision one = placer.PlaceQueue({Run("c2", "c", 8)});
  REQUIRE(one.preemptions.size() == 1);
  CHECK(one.preemptions[0].victim_run_id == "b1");
  CHECK(one.preemptions[0].reclaim);
}

TEST_CASE("Quotas: a run over its quota cannot reclaim from other borrowers",
          "[placement][quota]") {
  Placer placer(TwoTeams({Holding("a1", "a", "n1"), Holding("a2", "a", "n2"),
                          Holding("a3", "a", "n3"), Holding("b1", "b", "n4")}));
  // b is within its quota for 8 more GPUs: it takes them back from a.
  PlacementDecision decision = placer.PlaceQueue({Run("b2", "b", 8)});
  REQUIRE(decision.preemptions.size() == 1);
  CHECK(decision.preemptions[0].reclaim);
  // Now b is at its quota; a third run of b would borrow, and borrowing does not reclaim.
  decision = placer.PlaceQueue({Run("b3", "b", 8, true)});
  CHECK(decision.preemptions.empty());
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].reason == WaitReason::kWaitingToBorrow);
}

TEST_CASE("Quotas: a cluster no quota names is not limited by team", "[placement][quota]") {
  ClusterState state;
  state.nodes = {Node("n1"), Node("n2"), Node("x1", "c2"), Node("x2", "c2")};
  state.quotas = {{"a", "c1", "", 8}};
  Placer placer(state);
  QueuedRun wide = Run("a1", "a", 16);
  wide.request.cluster = "c2";
  const PlacementDecision decision = placer.PlaceQueue({wide});
  REQUIRE(decision.placements.size() == 1);
  CHECK_FALSE(decision.placements[0].borrowed);
  CHECK_FALSE(placer.quotas().Managed(placer.capacity().PoolOf(placer.capacity().FindNode("x1"))));
}

TEST_CASE("Quotas: a team with no quota in a managed cluster may only borrow",
          "[placement][quota]") {
  Placer placer(TwoTeams());
  const PlacementDecision decision =
      placer.PlaceQueue({Run("c1", "c", 8), Run("c2", "c", 8, true), Run("u1", "", 8)});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].run_id == "c2");
  CHECK(decision.placements[0].borrowed);
  REQUIRE(decision.waiting.size() == 2);
  CHECK(decision.waiting[0].reason == WaitReason::kQuotaReached);
  CHECK(decision.waiting[0].quota == 0);
  CHECK(decision.waiting[1].reason == WaitReason::kQuotaReached);
}

TEST_CASE("Quotas: a quota of one GPU type limits that type only", "[placement][quota]") {
  ClusterState state;
  state.nodes = {Node("h1", "c1", "h100"), Node("h2", "c1", "h100"), Node("a1", "c1", "a100")};
  state.quotas = {{"a", "c1", "h100", 8}, {"a", "c1", "", 16}};
  Placer placer(state);
  QueuedRun h100 = Run("r1", "a", 16);
  h100.request.gpu_type = "h100";
  QueuedRun a100 = Run("r2", "a", 8);
  a100.request.gpu_type = "a100";
  const PlacementDecision decision = placer.PlaceQueue({h100, a100});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].run_id == "r2");
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].reason == WaitReason::kQuotaReached);
  CHECK(decision.waiting[0].quota == 8);  // the h100 quota is the tighter one
  CHECK(decision.waiting[0].quota_used == 0);
}

TEST_CASE("Fair share: within a priority, the lower share rank goes first", "[placement][order]") {
  ClusterState state;
  state.nodes = {Node("n1")};
  Placer placer(state);
  QueuedRun early = Run("heavy-user", "a", 8, false, Priority::kMedium, 1);
  early.share_rank = 1;
  QueuedRun late = Run("light-user", "b", 8, false, Priority::kMedium, 2);
  late.share_rank = 0;
  QueuedRun lowest = Run("low-priority", "b", 8, false, Priority::kLow, 0);
  const PlacementDecision decision = placer.PlaceQueue({early, late, lowest});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].run_id == "light-user");
}

}  // namespace quota_test
}  // namespace tessera::scheduler
