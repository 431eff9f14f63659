// Runs that accept fewer nodes (QueuedRun::min_nodes): shrinking when all of their nodes cannot
// be had, and whether one running on fewer could have all of them again (Placer::CanGrow).

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "scheduler/placement/placer.h"

namespace tessera::scheduler {
namespace shrink_test {

NodeInfo Node(const std::string& name, bool schedulable = true) {
  NodeInfo node;
  node.name = name;
  node.cluster = "c1";
  node.gpu_type = "h100";
  node.gpu_count = 8;
  node.schedulable = schedulable;
  return node;
}

QueuedRun Run(const std::string& id, int nodes, int min_nodes, int64_t created = 0) {
  QueuedRun run;
  run.run_id = id;
  run.created_at_micros = created;
  run.request.gpus = 8 * nodes;
  run.request.nodes = nodes;
  run.min_nodes = min_nodes;
  return run;
}

RunningAllocation Holding(const std::string& id, std::vector<std::string> nodes,
                          bool preemptible = false, Priority priority = Priority::kMedium) {
  RunningAllocation allocation;
  allocation.run_id = id;
  allocation.preemptible = preemptible;
  allocation.priority = priority;
  for (size_t i = 0; i < nodes.size(); ++i) {
    allocation.nodes.push_back(
        NodeAssignment{nodes[i], static_cast<int>(i), {0, 1, 2, 3, 4, 5, 6, 7}});
  }
  return allocation;
}

std::vector<std::string> NodesOf(const Placement& placement) {
  std::vector<std::string> nodes;
  for (const NodeAssignment& assignment : placement.nodes) nodes.push_back(assignment.node);
  return nodes;
}

TEST_CASE("Shrinking: a run that may shrink starts on every free node, down to its minimum",
          "[placement][shrink]") {
  // Four nodes asked for; n4 is lost (unschedulable) and n1 busy: two are free.
  Placer placer(ClusterState{{Node("n1"), Node("n2"), Node("n3"), Node("n4", false)},
                             {Holding("other", {"n1"})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("big", 4, 2)});
  REQUIRE(decision.placements.size() == 1);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"n2", "n3"});
  CHECK(decision.placements[0].nodes[1].node_rank == 1);
  CHECK(decision.placements[0].nodes[0].gpu_indices.size() == 8);  // its nodes' size is kept
  CHECK(decision.waiting.empty());
  CHECK(placer.FreeUnits("n2") == 0);
}

TEST_CASE("Shrinking: never below the minimum, and a run without one waits as before",
          "[placement][shrink]") {
  const ClusterState cluster{{Node("n1"), Node("n2"), Node("n3", false)},
                             {Holding("other", {"n1"})}};
  {
    Placer placer(cluster);  // one free node, at least two wanted
    const PlacementDecision decision = placer.PlaceQueue({Run("big", 3, 2)});
    CHECK(decision.placements.empty());
    REQUIRE(decision.waiting.size() == 1);
    CHECK(decision.waiting[0].reason == WaitReason::kNotEnoughSchedulableNodes);
  }
  {
    Placer placer(cluster);  // min_nodes 0: both of its nodes or none (it reserves them)
    const PlacementDecision decision = placer.PlaceQueue({Run("big", 2, 0)});
    CHECK(decision.placements.empty());
    REQUIRE(decision.waiting.size() == 1);
    CHECK(decision.waiting[0].reason == WaitReason::kHoldsReservation);
  }
  {
    Placer placer(cluster);  // the same run allowed one node starts on n2
    const PlacementDecision decision = placer.PlaceQueue({Run("big", 2, 1)});
    REQUIRE(decision.placements.size() == 1);
    CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"n2"});
  }
}

TEST_CASE("Shrinking: all of its nodes first, by preemption if need be, before fewer",
          "[placement][shrink]") {
  // n2 holds a low-priority preemptible run: preempting it gives all three nodes.
  Placer placer(ClusterState{{Node("n1"), Node("n2"), Node("n3")},
                             {Holding("low", {"n2"}, true, Priority::kLow)}});
  const PlacementDecision decision = placer.PlaceQueue({Run("big", 3, 1)});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].nodes.size() == 3);
  CHECK(decision.placements[0].after_preemption);
  REQUIRE(decision.preemptions.size() == 1);
  CHECK(decision.preemptions[0].victim_run_id == "low");
}

TEST_CASE("Growing: a run on fewer nodes can grow once enough others are free",
          "[placement][shrink]") {
  ResourceRequest four;
  four.gpus = 32;
  four.nodes = 4;
  SECTION("two held, two more free") {
    Placer placer(ClusterState{{Node("n1"), Node("n2"), Node("n3"), Node("n4")},
                               {Holding("big", {"n1", "n2"})}});
    CHECK(placer.CanGrow("big", "", four));
    ResourceRequest two = four;
    two.gpus = 16;
    two.nodes = 2;
    CHECK_FALSE(placer.CanGrow("big", "", two));  // it has all it asks for
  }
  SECTION("one more free is not enough") {
    Placer placer(ClusterState{{Node("n1"), Node("n2"), Node("n3"), Node("n4")},
                               {Holding("big", {"n1", "n2"}), Holding("other", {"n4"})}});
    CHECK_FALSE(placer.CanGrow("big", "", four));
  }
  SECTION("a node that is not schedulable does not count") {
    Placer placer(ClusterState{{Node("n1"), Node("n2"), Node("n3"), Node("n4", false)},
                               {Holding("big", {"n1", "n2"})}});
    CHECK_FALSE(placer.CanGrow("big", "", four));
  }
  SECTION("nodes taken by this cycle's placements are not free") {
    Placer placer(ClusterState{{Node("n1"), Node("n2"), Node("n3"), Node("n4")},
                               {Holding("big", {"n1", "n2"})}});
    const PlacementDecision decision = placer.PlaceQueue({Run("queued", 1, 0)});
    REQUIRE(decision.placements.size() == 1);
    CHECK_FALSE(placer.CanGrow("big", "", four));
  }
  SECTION("its team's quota must have room for what it adds") {
    ClusterState state{{Node("n1"), Node("n2"), Node("n3"), Node("n4")},
                       {Holding("big", {"n1", "n2"})}};
    state.running[0].team = "a";
    state.quotas = {TeamQuota{"a", "c1", "", 24}};
    Placer placer(state);
    CHECK_FALSE(placer.CanGrow("big", "a", four));  // 16 held + 16 more > 24
    state.quotas = {TeamQuota{"a", "c1", "", 32}};
    Placer roomy(state);
    CHECK(roomy.CanGrow("big", "a", four));
  }
  SECTION("an unknown run cannot grow") {
    Placer placer(ClusterState{{Node("n1")}, {}});
    CHECK_FALSE(placer.CanGrow("nobody", "", four));
  }
}

}  // namespace shrink_test
}  // namespace tessera::scheduler
