// Gang placement, packing, node filters and the Placer's state between cycles.

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "scheduler/placement/placer.h"

namespace tessera::scheduler {
namespace placement_basics_test {

NodeInfo Node(const std::string& name, int gpus = 8, const std::string& cluster = "c1",
              const std::string& gpu_type = "h100") {
  NodeInfo node;
  node.name = name;
  node.cluster = cluster;
  node.gpu_type = gpus > 0 ? gpu_type : "";
  node.gpu_count = gpus;
  return node;
}

QueuedRun Run(const std::string& id, int gpus, int nodes = 0, int64_t created = 0) {
  QueuedRun run;
  run.run_id = id;
  run.created_at_micros = created;
  run.request.gpus = gpus;
  run.request.nodes = nodes;
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

const std::vector<int> kAllGpus = {0, 1, 2, 3, 4, 5, 6, 7};

TEST_CASE("Placement: a run of whole nodes takes them entirely, ranked", "[placement]") {
  Placer placer(ClusterState{{Node("n1"), Node("n2"), Node("n3"), Node("n4")}, {}});
  const PlacementDecision decision = placer.PlaceQueue({Run("big", 16)});
  REQUIRE(decision.placements.size() == 1);
  const Placement& placement = decision.placements[0];
  CHECK(placement.run_id == "big");
  CHECK_FALSE(placement.after_preemption);
  REQUIRE(placement.nodes.size() == 2);
  CHECK(placement.nodes[0].node == "n1");
  CHECK(placement.nodes[0].node_rank == 0);
  CHECK(placement.nodes[0].gpu_indices == kAllGpus);
  CHECK(placement.nodes[1].node == "n2");
  CHECK(placement.nodes[1].node_rank == 1);
  CHECK(placement.nodes[1].gpu_indices == kAllGpus);
  CHECK(decision.waiting.empty());
  CHECK(placer.FreeUnits("n1") == 0);
  CHECK(placer.FreeUnits("n3") == 8);
  CHECK(placer.IsPlaced("big"));
}

TEST_CASE("Placement: a run keeps off the nodes it avoids, others may use them", "[placement]") {
  Placer placer(ClusterState{{Node("n1"), Node("n2"), Node("n3")}, {}});
  QueuedRun resumed = Run("resumed", 16, 0, 1);
  resumed.avoid_nodes = {"n1", "unknown-node"};
  const PlacementDecision decision = placer.PlaceQueue({resumed, Run("next", 8, 0, 2)});
  REQUIRE(decision.placements.size() == 2);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"n2", "n3"});
  // Given back at once: the next run in the same cycle is placed on it.
  CHECK(NodesOf(decision.placements[1]) == std::vector<std::string>{"n1"});

  // When only the avoided node fits, the run waits (it reserves nothing there either).
  Placer small(ClusterState{{Node("n1"), Node("n2")}, {Holding("x", "n2", kAllGpus)}});
  QueuedRun alone = Run("alone", 8);
  alone.avoid_nodes = {"n1"};
  const PlacementDecision waits = small.PlaceQueue({alone});
  CHECK(waits.placements.empty());
  REQUIRE(waits.waiting.size() == 1);
  for (const auto& r : waits.reservations) {
    CHECK(std::find(r.nodes.begin(), r.nodes.end(), "n1") == r.nodes.end());
  }
  CHECK(small.FreeUnits("n1") == 8);
  alone.avoid_nodes.clear();
  REQUIRE(small.PlaceQueue({alone}).placements.size() == 1);

  // A run that names its nodes keeps them.
  Placer named(ClusterState{{Node("n1"), Node("n2")}, {}});
  QueuedRun pinned = Run("pinned", 8);
  pinned.request.node_names = {"n1"};
  pinned.avoid_nodes = {"n1"};
  const PlacementDecision on_named = named.PlaceQueue({pinned});
  REQUIRE(on_named.placements.size() == 1);
  CHECK(NodesOf(on_named.placements[0]) == std::vector<std::string>{"n1"});
}

TEST_CASE("Placement: small runs pack onto the fullest node that fits (best fit)", "[placement]") {
  // n1 empty, n2 has 2 GPUs free, n3 has 4 free.
  Placer placer(
      ClusterState{{Node("n1"), Node("n2"), Node("n3")},
                   {Holding("x", "n2", {0, 1, 2, 3, 4, 5}), Holding("y", "n3", {0, 1, 2, 3})}});
  const PlacementDecision decision =
      placer.PlaceQueue({Run("two", 2, 0, 1), Run("three", 3, 0, 2), Run("four", 4, 0, 3)});
  REQUIRE(decision.placements.size() == 3);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"n2"});
  CHECK(decision.placements[0].nodes[0].gpu_indices == std::vector<int>{6, 7});
  CHECK(NodesOf(decision.placements[1]) == std::vector<std::string>{"n3"});
  CHECK(decision.placements[1].nodes[0].gpu_indices == std::vector<int>{4, 5, 6});
  // n3 has one GPU left, so four GPUs go to the empty node, in its first half.
  CHECK(NodesOf(decision.placements[2]) == std::vector<std::string>{"n1"});
  CHECK(decision.placements[2].nodes[0].gpu_indices == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("Placement: nodes given puts gpus / nodes GPUs on each of that many nodes",
          "[placement]") {
  Placer placer(ClusterState{{Node("n1"), Node("n2"), Node("n3")},
                             {Holding("x", "n2", {0, 1, 2, 3}), Holding("y", "n3", {4, 5, 6, 7})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("spread", 8, 2)});
  REQUIRE(decision.placements.size() == 1);
  // Best fit: the two half-full nodes, not the empty one.
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"n2", "n3"});
  CHECK(decision.placements[0].nodes[0].gpu_indices == std::vector<int>{4, 5, 6, 7});
  CHECK(decision.placements[0].nodes[1].gpu_indices == std::vector<int>{0, 1, 2, 3});
  CHECK(placer.FreeUnits("n1") == 8);
}

TEST_CASE("Placement: cluster and GPU type select the nodes", "[placement]") {
  Placer placer(ClusterState{
      {Node("h1", 8, "c1", "h100"), Node("a1", 8, "c1", "a100"), Node("b1", 8, "c2", "a100")}, {}});
  QueuedRun a100 = Run("a100-run", 8);
  a100.request.gpu_type = "a100";
  QueuedRun c2 = Run("c2-run", 8);
  c2.request.cluster = "c2";
  QueuedRun h100_c1 = Run("h100-run", 4);
  h100_c1.request.cluster = "c1";
  h100_c1.request.gpu_type = "h100";
  QueuedRun missing = Run("v100-run", 1);
  missing.request.gpu_type = "v100";
  const PlacementDecision decision = placer.PlaceQueue({a100, c2, h100_c1, missing});
  REQUIRE(decision.placements.size() == 3);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"a1"});  // c1 sorts first
  CHECK(NodesOf(decision.placements[1]) == std::vector<std::string>{"b1"});
  CHECK(NodesOf(decision.placements[2]) == std::vector<std::string>{"h1"});
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].queue_index == 3);
  CHECK(decision.waiting[0].reason == WaitReason::kNoMatchingNodes);
}

TEST_CASE("Placement: unschedulable nodes receive nothing", "[placement]") {
  NodeInfo cordoned = Node("n1");
  cordoned.schedulable = false;
  Placer placer(ClusterState{{cordoned, Node("n2"), Node("n3")}, {}});
  REQUIRE(placer.SetNodeSchedulable("n3", false));  // e.g. lost after the snapshot
  PlacementDecision decision =
      placer.PlaceQueue({Run("a", 1, 0, 1), Run("b", 8, 0, 3), Run("c", 1, 0, 2)});
  REQUIRE(decision.placements.size() == 2);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"n2"});
  CHECK(NodesOf(decision.placements[1]) == std::vector<std::string>{"n2"});
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].queue_index == 1);
  CHECK(placer.FreeUnits("n1") == 8);
  CHECK(placer.FreeUnits("n3") == 8);
  // A 24-GPU run needs three schedulable nodes; only one is.
  decision = placer.PlaceQueue({Run("wide", 24)});
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].reason == WaitReason::kNotEnoughSchedulableNodes);
  // Back in service, the node takes work again.
  REQUIRE(placer.SetNodeSchedulable("n3", true));
  decision = placer.PlaceQueue({Run("b", 8)});
  REQUIRE(decision.placements.size() == 1);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"n3"});
}

TEST_CASE("Placement: a gang gets all of its nodes or none", "[placement]") {
  Placer placer(
      ClusterState{{Node("n1"), Node("n2"), Node("n3"), Node("n4")}, {Holding("x", "n4", {0})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("gang", 32)});
  CHECK(decision.placements.empty());
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].reason == WaitReason::kHoldsReservation);
  for (const char* node : {"n1", "n2", "n3"}) CHECK(placer.FreeUnits(node) == 8);
  CHECK(placer.FreeUnits("n4") == 7);
  CHECK_FALSE(placer.IsPlaced("gang"));
  // Once x ends the gang starts.
  REQUIRE(placer.Release("x"));
  CHECK_FALSE(placer.Release("x"));
  const PlacementDecision next = placer.PlaceQueue({Run("gang", 32)});
  REQUIRE(next.placements.size() == 1);
  CHECK(NodesOf(next.placements[0]) == std::vector<std::string>{"n1", "n2", "n3", "n4"});
}

TEST_CASE("Placement: CPU-only runs hold whole nodes, CPU nodes when there are any",
          "[placement]") {
  Placer placer(
      ClusterState{{Node("g1"), Node("cpu1", 0), Node("cpu2", 0), Node("other-g1", 8, "c2")}, {}});
  QueuedRun elsewhere = Run("c-d", 0, 0, 4);
  elsewhere.request.cluster = "c2";  // no CPU-only nodes there: a whole GPU node
  const PlacementDecision decision =
      placer.PlaceQueue({Run("c-a", 0, 0, 1), Run("c-b", 0, 0, 2), Run("c-c", 0, 0, 3), elsewhere,
                         Run("gpu-one", 1, 0, 5)});
  REQUIRE(decision.placements.size() == 4);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"cpu1"});
  CHECK(decision.placements[0].nodes[0].gpu_indices.empty());
  CHECK(NodesOf(decision.placements[1]) == std::vector<std::string>{"cpu2"});
  // c-c waits for a CPU node rather than holding eight GPUs.
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].queue_index == 2);
  CHECK(NodesOf(decision.placements[2]) == std::vector<std::string>{"other-g1"});
  CHECK(decision.placements[2].nodes[0].gpu_indices.empty());
  CHECK(placer.FreeUnits("other-g1") == 0);
  CHECK(decision.placements[3].run_id == "gpu-one");
  CHECK(NodesOf(decision.placements[3]) == std::vector<std::string>{"g1"});
}

TEST_CASE("Placement: explicit node names are used as listed", "[placement]") {
  Placer placer(ClusterState{{Node("n1"), Node("n2"), Node("n3")}, {Holding("x", "n2", {0})}});
  QueuedRun named = Run("named", 16, 0, 3);
  named.request.node_names = {"n3", "n1"};
  QueuedRun busy = Run("busy", 8, 0, 2);
  busy.request.node_names = {"n2"};
  QueuedRun unknown = Run("unknown", 8, 0, 1);
  unknown.request.node_names = {"n9"};
  const PlacementDecision decision = placer.PlaceQueue({named, busy, unknown});
  REQUIRE(decision.placements.size() == 1);
  CHECK(NodesOf(decision.placements[0]) == std::vector<std::string>{"n3", "n1"});
  CHECK(decision.placements[0].nodes[0].node_rank == 0);
  REQUIRE(decision.waiting.size() == 2);
  CHECK(decision.waiting[0].queue_index == 2);
  CHECK(decision.waiting[0].reason == WaitReason::kNoMatchingNodes);
  CHECK(decision.waiting[1].queue_index == 1);
  CHECK(decision.waiting[1].reason == WaitReason::kHoldsReservation);
  REQUIRE(decision.reservations.size() == 1);
  CHECK(decision.reservations[0].nodes == std::vector<std::string>{"n2"});
}

TEST_CASE("Placement: the snapshot's running allocations are honoured", "[placement]") {
  RunningAllocation cpu_run;
  cpu_run.run_id = "cpu";
  cpu_run.nodes.push_back(NodeAssignment{"n1", 0, {}});  // a CPU run holds the whole node
  Placer placer(ClusterState{{Node("n1"), Node("n2")},
                             {cpu_run, Holding("gpu", "n2", {1, 3}),
                              Holding("gone", "n9", {0})}});  // its node left: ignored
  CHECK(placer.FreeUnits("n1") == 0);
  CHECK(placer.FreeUnits("n2") == 6);
  const PlacementDecision decision = placer.PlaceQueue({Run("again", 1, 0), Run("gpu", 1)});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].run_id == "again");
  CHECK(decision.placements[0].nodes[0].gpu_indices == std::vector<int>{0});
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].reason == WaitReason::kAlreadyPlaced);
  CHECK(placer.Release("cpu"));
  CHECK(placer.FreeUnits("n1") == 8);
}

}  // namespace placement_basics_test
}  // namespace tessera::scheduler
