// Preemption: the cheapest victims, and never the ones that must not be preempted.

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/placement/placer.h"

namespace tessera::scheduler {
namespace preemption_test {

NodeInfo Node(const std::string& name) {
  NodeInfo node;
  node.name = name;
  node.cluster = "c1";
  node.gpu_type = "h100";
  node.gpu_count = 8;
  return node;
}

QueuedRun Run(const std::string& id, int gpus, Priority priority, int64_t created = 0) {
  QueuedRun run;
  run.run_id = id;
  run.request.gpus = gpus;
  run.priority = priority;
  run.created_at_micros = created;
  return run;
}

// A running allocation: `parts` are (node, GPU indices).
RunningAllocation Holding(const std::string& id, Priority priority, bool preemptible,
                          int64_t started,
                          std::vector<std::pair<std::string, std::vector<int>>> parts) {
  RunningAllocation allocation;
  allocation.run_id = id;
  allocation.priority = priority;
  allocation.preemptible = preemptible;
  allocation.started_at_micros = started;
  for (auto& [node, gpus] : parts) {
    allocation.nodes.push_back(
        NodeAssignment{node, static_cast<int>(allocation.nodes.size()), std::move(gpus)});
  }
  return allocation;
}

std::vector<std::string> Victims(const PlacementDecision& decision) {
  std::vector<std::string> victims;
  for (const Preemption& preemption : decision.preemptions) {
    victims.push_back(preemption.victim_run_id);
  }
  return victims;
}

constexpr Priority kLowest = Priority::kLowest;
constexpr Priority kLow = Priority::kLow;
constexpr Priority kMedium = Priority::kMedium;
constexpr Priority kHigh = Priority::kHigh;

TEST_CASE("Preemption: the fewest GPUs, then the newest victim", "[placement][preemption]") {
  Placer placer(ClusterState{{Node("n1")},
                             {Holding("four", kLow, true, 1, {{"n1", {0, 1, 2, 3}}}),
                              Holding("two-old", kLow, true, 2, {{"n1", {4, 5}}}),
                              Holding("two-new", kLow, true, 3, {{"n1", {6, 7}}})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("urgent", 2, kHigh)});
  CHECK(Victims(decision) == std::vector<std::string>{"two-new"});
  REQUIRE(decision.preemptions.size() == 1);
  CHECK(decision.preemptions[0].for_run_id == "urgent");
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].after_preemption);
  CHECK(decision.placements[0].nodes[0].gpu_indices == std::vector<int>{6, 7});
  CHECK_FALSE(placer.IsPlaced("two-new"));
  CHECK(placer.IsPlaced("two-old"));
  CHECK(placer.IsPlaced("four"));
}

TEST_CASE("Preemption: fewest GPUs beats lowest priority, lowest priority breaks ties",
          "[placement][preemption]") {
  {
    Placer placer(ClusterState{{Node("n1")},
                               {Holding("lowest-four", kLowest, true, 1, {{"n1", {0, 1, 2, 3}}}),
                                Holding("low-two", kLow, true, 1, {{"n1", {4, 5}}}),
                                Holding("keep", kHigh, false, 1, {{"n1", {6, 7}}})}});
    const PlacementDecision decision = placer.PlaceQueue({Run("urgent", 2, kHigh)});
    CHECK(Victims(decision) == std::vector<std::string>{"low-two"});
  }
  {
    Placer placer(ClusterState{{Node("n1")},
                               {Holding("medium-two", kMedium, true, 9, {{"n1", {0, 1}}}),
                                Holding("lowest-two", kLowest, true, 1, {{"n1", {2, 3}}}),
                                Holding("keep", kHigh, false, 1, {{"n1", {4, 5, 6, 7}}})}});
    const PlacementDecision decision = placer.PlaceQueue({Run("urgent", 2, kHigh)});
    CHECK(Victims(decision) == std::vector<std::string>{"lowest-two"});
  }
}

TEST_CASE("Preemption: free GPUs count, so the node needing least is cleared",
          "[placement][preemption]") {
  Placer placer(
      ClusterState{{Node("n1"), Node("n2")},
                   {Holding("half", kLow, true, 1, {{"n1", {0, 1, 2, 3}}}),
                    Holding("whole", kLowest, true, 1, {{"n2", {0, 1, 2, 3, 4, 5, 6, 7}}})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("urgent", 8, kMedium)});
  CHECK(Victims(decision) == std::vector<std::string>{"half"});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].nodes[0].node == "n1");
}

TEST_CASE("Preemption: a multi-node victim costs all of its GPUs", "[placement][preemption]") {
  // Freeing 4 GPUs on n1: "spans" would cost 8 GPUs (it also holds 4 on n2), "local" costs 4.
  Placer placer(ClusterState{
      {Node("n1"), Node("n2")},
      {Holding("spans", kLowest, true, 5, {{"n1", {0, 1, 2, 3}}, {"n2", {0, 1, 2, 3}}}),
       Holding("local", kLow, true, 1, {{"n1", {4, 5, 6, 7}}}),
       Holding("keep", kLow, false, 1, {{"n2", {4, 5, 6, 7}}})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("urgent", 4, kHigh)});
  CHECK(Victims(decision) == std::vector<std::string>{"local"});
}

TEST_CASE("Preemption: never non-preemptible or equal-priority runs", "[placement][preemption]") {
  Placer placer(
      ClusterState{{Node("n1"), Node("n2")},
                   {Holding("pinned", kLowest, false, 1, {{"n1", {0, 1, 2, 3, 4, 5, 6, 7}}}),
                    Holding("peer", kHigh, true, 1, {{"n2", {0, 1, 2, 3, 4, 5, 6, 7}}})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("urgent", 1, kHigh)});
  CHECK(decision.preemptions.empty());
  CHECK(decision.placements.empty());
  REQUIRE(decision.waiting.size() == 1);
  // Nothing free and nothing it may preempt: it waits (the cycle stops examining here).
  CHECK(decision.waiting[0].reason == WaitReason::kWaitingForCapacity);
  CHECK(placer.IsPlaced("pinned"));
  CHECK(placer.IsPlaced("peer"));
}

TEST_CASE("Preemption: nothing is evicted unless the run then fits", "[placement][preemption]") {
  Placer placer(ClusterState{{Node("n1")},
                             {Holding("victim", kLowest, true, 1, {{"n1", {0, 1, 2, 3}}}),
                              Holding("pinned", kLowest, false, 1, {{"n1", {4, 5, 6, 7}}})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("urgent", 8, kHigh)});
  CHECK(decision.preemptions.empty());
  CHECK(decision.placements.empty());
  CHECK(placer.IsPlaced("victim"));
}

TEST_CASE("Preemption: a gang clears the cheapest nodes, newest victims first",
          "[placement][preemption]") {
  Placer placer(
      ClusterState{{Node("n1"), Node("n2"), Node("n3"), Node("n4")},
                   {Holding("old", kLow, true, 1, {{"n1", {0, 1, 2, 3, 4, 5, 6, 7}}}),
                    Holding("newest", kLow, true, 30, {{"n2", {0, 1, 2, 3, 4, 5, 6, 7}}}),
                    Holding("newer", kLow, true, 20, {{"n3", {0, 1, 2, 3, 4, 5, 6, 7}}}),
                    Holding("pinned", kLowest, false, 1, {{"n4", {0, 1, 2, 3, 4, 5, 6, 7}}})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("gang", 16, kMedium)});
  CHECK(Victims(decision) == std::vector<std::string>{"newest", "newer"});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].nodes[0].node == "n2");
  CHECK(decision.placements[0].nodes[1].node == "n3");
  CHECK(placer.IsPlaced("old"));
}

TEST_CASE("Preemption: one multi-node victim can clear several nodes at once",
          "[placement][preemption]") {
  Placer placer(
      ClusterState{{Node("n1"), Node("n2"), Node("n3")},
                   {Holding("pair", kLow, true, 1,
                            {{"n1", {0, 1, 2, 3, 4, 5, 6, 7}}, {"n2", {0, 1, 2, 3, 4, 5, 6, 7}}}),
                    Holding("single", kLow, true, 1, {{"n3", {0}}})}});
  const PlacementDecision decision = placer.PlaceQueue({Run("gang", 24, kHigh)});
  CHECK(Victims(decision) == std::vector<std::string>{"single", "pair"});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].nodes.size() == 3);
}

TEST_CASE("Preemption: a gang that cannot clear enough nodes does not stop smaller runs",
          "[placement][preemption]") {
  NodeInfo cordoned = Node("n3");
  cordoned.schedulable = false;
  Placer placer(
      ClusterState{{Node("n1"), Node("n2"), cordoned},
                   {Holding("victim", kLowest, true, 1, {{"n1", {0, 1, 2, 3, 4, 5, 6, 7}}}),
                    Holding("pinned", kLowest, false, 1, {{"n2", {0, 1, 2, 3, 4, 5, 6, 7}}})}});
  const std::vector<QueuedRun> queue = {Run("wide", 24, kHigh, 1), Run("pair", 16, kHigh, 2),
                                        Run("one", 8, kHigh, 3)};
  const PlacementDecision decision = placer.PlaceQueue(queue);
  // wide needs three schedulable nodes: it never tries to preempt. pair can clear one node of
  // two: nothing is evicted for it, and it reserves n1 and n2, so one (which could clear n1)
  // must not take n1 from it.
  CHECK(decision.preemptions.empty());
  REQUIRE(decision.waiting.size() == 3);
  CHECK(decision.waiting[0].reason == WaitReason::kNotEnoughSchedulableNodes);
  CHECK(decision.waiting[1].reason == WaitReason::kHoldsReservation);
  CHECK(decision.waiting[2].reason == WaitReason::kWaitingForCapacity);
  // Without the pair ahead of it, one preempts the victim.
  const PlacementDecision alone = placer.PlaceQueue({queue[0], queue[2]});
  CHECK(Victims(alone) == std::vector<std::string>{"victim"});
  REQUIRE(alone.placements.size() == 1);
  CHECK(alone.placements[0].run_id == "one");
}

TEST_CASE("Preemption: a victim can be preempted once, lower priorities wait their turn",
          "[placement][preemption]") {
  Placer placer(ClusterState{
      {Node("n1")}, {Holding("victim", kLowest, true, 1, {{"n1", {0, 1, 2, 3, 4, 5, 6, 7}}})}});
  const PlacementDecision decision =
      placer.PlaceQueue({Run("high", 8, kHigh, 1), Run("low", 8, kLow, 0)});
  CHECK(Victims(decision) == std::vector<std::string>{"victim"});
  REQUIRE(decision.placements.size() == 1);
  CHECK(decision.placements[0].run_id == "high");
  REQUIRE(decision.waiting.size() == 1);
  CHECK(decision.waiting[0].queue_index == 1);
}

}  // namespace preemption_test
}  // namespace tessera::scheduler
