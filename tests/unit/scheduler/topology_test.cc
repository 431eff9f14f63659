// Topology: one switch, else one rack, else as few switches as possible.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "scheduler/placement/placer.h"

namespace tessera::scheduler {
namespace topology_test {

NodeInfo Node(const std::string& name, const std::string& network_switch,
              const std::string& rack = "") {
  NodeInfo node;
  node.name = name;
  node.cluster = "c1";
  node.gpu_type = "h100";
  node.gpu_count = 8;
  node.network_switch = network_switch;
  node.rack = rack;
  return node;
}

QueuedRun Run(const std::string& id, int gpus, int nodes = 0, int64_t created = 0) {
  QueuedRun run;
  run.run_id = id;
  run.request.gpus = gpus;
  run.request.nodes = nodes;
  run.created_at_micros = created;
  return run;
}

RunningAllocation Holding(const std::string& id, const std::string& node, std::vector<int> gpus) {
  RunningAllocation allocation;
  allocation.run_id = id;
  allocation.nodes.push_back(NodeAssignment{node, 0, std::move(gpus)});
  return allocation;
}

std::vector<std::string> NodesOf(const Placement& placement) {
  std::vector<std::string> nodes;
  for (const NodeAssignment& assignment : placement.nodes) nodes.push_back(assignment.node);
  return nodes;
}

TEST_CASE("Topology: a gang stays under one switch rather than take the lowest names",
          "[placement][topology]") {
  Placer placer(
      ClusterState{{Node("a1", "sw-a"), Node("a2", "sw-a"), Node("b1", "sw-b"), Node("b2", "sw-b")},
                   {Holding("busy", "a2", {0})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("gang", 16)});
  REQUIRE(decision.placements.size() == 1);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"b1", "b2"});
}

TEST_CASE("Topology: the smallest switch that holds the gang (best fit)", "[placement][topology]") {
  Placer placer(
      ClusterState{{Node("b1", "sw-b"), Node("b2", "sw-b"), Node("b3", "sw-b"), Node("b4", "sw-b"),
                    Node("b5", "sw-b"), Node("a1", "sw-a"), Node("a2", "sw-a"), Node("a3", "sw-a")},
                   {}});
  const PlacementDecision decision =
      placer.PlaceQueue({Run("three", 24, 0, 1), Run("four", 32, 0, 2)});
  REQUIRE(decision.placements.size() == 2);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"a1", "a2", "a3"});
  CHECK(NodesOf(decision.placements[1]) == std::vector<std::string>{"b1", "b2", "b3", "b4"});
  for (size_t rank = 0; rank < decision.placements[1].nodes.size(); ++rank) {
    CHECK(decision.placements[1].nodes[rank].node_rank == static_cast<int>(rank));
  }
}

TEST_CASE("Topology: one rack when no switch holds the gang", "[placement][topology]") {
  Placer placer(ClusterState{
      {Node("a1", "sw-a", "r2"), Node("b1", "sw-b", "r1"), Node("c1", "sw-c", "r1")}, {}});
  const PlacementDecision decision = placer.PlaceQueue({Run("gang", 16)});
  REQUIRE(decision.placements.size() == 1);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"b1", "c1"});
}

TEST_CASE("Topology: spanning switches uses as few as it can, unlabelled nodes last",
          "[placement][topology]") {
  Placer placer(
      ClusterState{{Node("a1", "sw-a"), Node("a2", "sw-a"), Node("b1", "sw-b"), Node("b2", "sw-b"),
                    Node("b3", "sw-b"), Node("c1", "sw-c"), Node("u1", "")},
                   {}});
  const PlacementDecision decision =
      placer.PlaceQueue({Run("five", 40, 0, 1), Run("two", 16, 0, 2)});
  REQUIRE(decision.placements.size() == 2);
  // The largest switch (3 nodes), then the smallest that holds the remaining two.
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"a1", "a2", "b1", "b2", "b3"});
  // Unlabelled nodes sort first by id, so they get rank 0 when used.
  CHECK(NodesOf(decision.placements[1]) == std::vector<std::string>{"u1", "c1"});
}

TEST_CASE("Topology: partial nodes of a gang also stay under one switch", "[placement][topology]") {
  Placer placer(
      ClusterState{{Node("a1", "sw-a"), Node("a2", "sw-a"), Node("b1", "sw-b"), Node("b2", "sw-b")},
                   {Holding("x", "a2", {0, 1, 2, 3, 4}), Holding("y", "b1", {0, 1, 2, 3}),
                    Holding("z", "b2", {4, 5, 6, 7})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("spread", 8, 2)});
  REQUIRE(decision.placements.size() == 1);
  // sw-a has one node with 4 free GPUs (a2 has 3): sw-b holds both halves.
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"b1", "b2"});
}

}  // namespace topology_test
}  // namespace tessera::scheduler
