// Queue order (priority, then FIFO) and EASY backfill with reservations.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "scheduler/placement/placer.h"

namespace tessera::scheduler {
namespace placement_order_test {

NodeInfo Node(const std::string& name, const std::string& cluster = "c1") {
  NodeInfo node;
  node.name = name;
  node.cluster = cluster;
  node.gpu_type = "h100";
  node.gpu_count = 8;
  return node;
}

QueuedRun Run(const std::string& id, int gpus, Priority priority, int64_t created) {
  QueuedRun run;
  run.run_id = id;
  run.request.gpus = gpus;
  run.priority = priority;
  run.created_at_micros = created;
  return run;
}

RunningAllocation Holding(const std::string& id, const std::string& node, std::vector<int> gpus) {
  RunningAllocation allocation;
  allocation.run_id = id;
  allocation.nodes.push_back(NodeAssignment{node, 0, std::move(gpus)});
  return allocation;
}

std::vector<std::string> PlacedRuns(const PlacementDecision& decision) {
  std::vector<std::string> runs;
  for (const Placement& placement : decision.placements) runs.push_back(placement.run_id);
  return runs;
}

std::vector<std::string> WaitingRuns(const PlacementDecision& decision,
                                     const std::vector<QueuedRun>& queue) {
  std::vector<std::string> runs;
  for (const Waiting& waiting : decision.waiting) runs.push_back(queue[waiting.queue_index].run_id);
  return runs;
}

TEST_CASE("Order: higher priority first, FIFO within a priority, then run id", "[placement]") {
  Placer placer(ClusterState{{Node("n1")}, {}});
  const std::vector<QueuedRun> queue = {
      Run("low-old", 1, Priority::kLow, 1),        Run("lowest", 1, Priority::kLowest, 0),
      Run("high-late", 1, Priority::kHigh, 50),    Run("medium-b", 1, Priority::kMedium, 7),
      Run("medium-a", 1, Priority::kMedium, 7),    Run("high-early", 1, Priority::kHigh, 10),
      Run("medium-first", 1, Priority::kMedium, 3)};
  const PlacementDecision decision = placer.PlaceQueue(queue);
  CHECK(PlacedRuns(decision) == std::vector<std::string>{"high-early", "high-late", "medium-first",
                                                         "medium-a", "medium-b", "low-old",
                                                         "lowest"});
}

TEST_CASE("Order: when capacity runs out, the first in order win", "[placement]") {
  Placer placer(ClusterState{{Node("n1")}, {}});
  const std::vector<QueuedRun> queue = {
      Run("medium", 4, Priority::kMedium, 1), Run("low", 4, Priority::kLow, 0),
      Run("high", 4, Priority::kHigh, 9), Run("medium-later", 4, Priority::kMedium, 2)};
  const PlacementDecision decision = placer.PlaceQueue(queue);
  CHECK(PlacedRuns(decision) == std::vector<std::string>{"high", "medium"});
  CHECK(WaitingRuns(decision, queue) == std::vector<std::string>{"medium-later", "low"});
  CHECK(decision.waiting[0].reason == WaitReason::kWaitingForCapacity);
}

TEST_CASE("Backfill: later runs start only on nodes the head has not reserved", "[placement]") {
  // Free GPUs: n1 4, n2 0, n3 2, n4 1.
  Placer placer(ClusterState{
      {Node("n1"), Node("n2"), Node("n3"), Node("n4")},
      {Holding("x", "n1", {0, 1, 2, 3}), Holding("y", "n2", {0, 1, 2, 3, 4, 5, 6, 7}),
       Holding("z", "n3", {0, 1, 2, 3, 4, 5}), Holding("w", "n4", {0, 1, 2, 3, 4, 5, 6})}});
  const std::vector<QueuedRun> queue = {
      Run("head", 16, Priority::kMedium, 1),  // two whole nodes: none is free
      Run("small-two", 2, Priority::kMedium, 2), Run("small-one", 1, Priority::kMedium, 3),
      Run("big-too", 16, Priority::kMedium, 4)};
  const PlacementDecision decision = placer.PlaceQueue(queue);
  // The head reserves the two nodes closest to free: n1 (4 free) and n3 (2 free).
  REQUIRE(decision.reservations.size() == 1);
  CHECK(decision.reservations[0].run_id == "head");
  CHECK(decision.reservations[0].nodes == std::vector<std::string>{"n1", "n3"});
  // One GPU fits on n4, outside the reservation: it is backfilled. Two GPUs would fit only on
  // the reserved n1 or n3, which would delay the head: that run waits.
  CHECK(PlacedRuns(decision) == std::vector<std::string>{"small-one"});
  CHECK(decision.placements[0].nodes[0].node == "n4");
  CHECK(WaitingRuns(decision, queue) == std::vector<std::string>{"head", "small-two", "big-too"});
  CHECK(decision.waiting[0].reason == WaitReason::kHoldsReservation);
  CHECK(decision.waiting[1].reason == WaitReason::kBlockedByReservation);
  CHECK(decision.waiting[2].reason == WaitReason::kWaitingForCapacity);
  // The reservation lasts one cycle: the nodes' free GPUs are untouched.
  CHECK(placer.FreeUnits("n1") == 4);
  CHECK(placer.FreeUnits("n3") == 2);
  CHECK(placer.capacity().available_free_units() == 6);

  // x and z end: the head starts on its reserved nodes before anything else.
  REQUIRE(placer.Release("x"));
  REQUIRE(placer.Release("z"));
  const std::vector<QueuedRun> next_queue = {queue[1], queue[3], queue[0]};
  const PlacementDecision next = placer.PlaceQueue(next_queue);
  REQUIRE(next.placements.size() == 1);
  CHECK(next.placements[0].run_id == "head");
  CHECK(next.placements[0].nodes[0].node == "n1");
  CHECK(next.placements[0].nodes[1].node == "n3");
}

TEST_CASE("Backfill: a reservation holds only in its own pool", "[placement]") {
  Placer placer(ClusterState{{Node("a1", "c1"), Node("b1", "c2")}, {Holding("x", "a1", {0})}});
  QueuedRun head = Run("head", 8, Priority::kHigh, 1);
  head.request.cluster = "c1";
  QueuedRun other = Run("other", 4, Priority::kLow, 2);
  other.request.cluster = "c2";
  QueuedRun same = Run("same", 1, Priority::kLow, 3);
  same.request.cluster = "c1";
  const std::vector<QueuedRun> queue = {head, other, same};
  const PlacementDecision decision = placer.PlaceQueue(queue);
  CHECK(PlacedRuns(decision) == std::vector<std::string>{"other"});
  CHECK(WaitingRuns(decision, queue) == std::vector<std::string>{"head", "same"});
  CHECK(decision.waiting[1].reason == WaitReason::kBlockedByReservation);
}

}  // namespace placement_order_test
}  // namespace tessera::scheduler
