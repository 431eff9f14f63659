// Determinism (the same inputs in any order give the same decision) and invariants over many
// random cycles: no GPU given twice, only schedulable nodes receive work, gangs are whole, and
// victims are always preemptible and of strictly lower priority.

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/placement/placer.h"

namespace tessera::scheduler {
namespace determinism_test {

std::vector<NodeInfo> RandomNodes(std::mt19937& random, int count) {
  std::vector<NodeInfo> nodes;
  for (int i = 0; i < count; ++i) {
    NodeInfo node;
    node.name = absl::StrCat("node-", i);
    node.cluster = i % 5 == 0 ? "c2" : "c1";
    node.gpu_type = i % 7 == 0 ? "a100" : "h100";
    node.gpu_count = 8;
    node.network_switch = absl::StrCat("sw-", (i / 4) % 6);
    node.rack = absl::StrCat("rack-", (i / 12) % 3);
    node.schedulable = random() % 10 != 0;
    nodes.push_back(node);
  }
  return nodes;
}

QueuedRun RandomRun(std::mt19937& random, int index) {
  static const int kGpus[] = {0, 1, 2, 3, 4, 8, 8, 16, 24, 32};
  QueuedRun run;
  run.run_id = absl::StrCat("run-", index);
  run.created_at_micros = static_cast<int64_t>(random() % 50);  // many equal times
  run.priority = static_cast<Priority>(1 + random() % 4);
  run.preemptible = random() % 2 == 0;
  run.request.gpus = kGpus[random() % 10];
  if (run.request.gpus == 8 && random() % 3 == 0) run.request.nodes = 2;
  if (random() % 4 == 0) run.request.cluster = "c1";
  if (random() % 6 == 0) run.request.gpu_type = "h100";
  return run;
}

// A decision with run ids instead of queue positions, for comparing across shuffled queues.
std::string Describe(const PlacementDecision& decision, const std::vector<QueuedRun>& queue) {
  std::string text;
  for (const Placement& placement : decision.placements) {
    absl::StrAppend(&text, "place ", placement.run_id, placement.after_preemption ? "!" : "", ":");
    for (const NodeAssignment& node : placement.nodes) {
      absl::StrAppend(&text, " ", node.node, "#", node.node_rank, "[");
      for (int gpu : node.gpu_indices) absl::StrAppend(&text, gpu, ",");
      absl::StrAppend(&text, "]");
    }
    absl::StrAppend(&text, "\n");
  }
  for (const Preemption& preemption : decision.preemptions) {
    absl::StrAppend(&text, "preempt ", preemption.victim_run_id, " for ", preemption.for_run_id,
                    "\n");
  }
  for (const Reservation& reservation : decision.reservations) {
    absl::StrAppend(&text, "reserve ", reservation.run_id, ":");
    for (const std::string& node : reservation.nodes) absl::StrAppend(&text, " ", node);
    absl::StrAppend(&text, "\n");
  }
  for (const Waiting& waiting : decision.waiting) {
    absl::StrAppend(&text, "wait ", queue[waiting.queue_index].run_id, " ",
                    static_cast<int>(waiting.reason), "\n");
  }
  return text;
}

TEST_CASE("Determinism: the same inputs in any order give the same decision",
          "[placement][determinism]") {
  std::mt19937 random(7);
  ClusterState state;
  state.nodes = RandomNodes(random, 60);
  // Running work: what a first placer decides for a first queue.
  {
    std::vector<QueuedRun> first;
    for (int i = 0; i < 80; ++i) first.push_back(RandomRun(random, 1000 + i));
    Placer seed(state);
    const PlacementDecision placed = seed.PlaceQueue(first);
    std::map<std::string, const QueuedRun*> by_id;
    for (const QueuedRun& run : first) by_id[run.run_id] = &run;
    for (const Placement& placement : placed.placements) {
      const QueuedRun& run = *by_id[placement.run_id];
      state.running.push_back(RunningAllocation{run.run_id, run.priority, run.preemptible,
                                                static_cast<int64_t>(random() % 100),
                                                placement.nodes});
    }
    REQUIRE(state.running.size() > 10);
  }
  std::vector<QueuedRun> queue;
  for (int i = 0; i < 300; ++i) queue.push_back(RandomRun(random, i));

  Placer placer(state);
  const PlacementDecision expected = placer.PlaceQueue(queue);
  REQUIRE_FALSE(expected.placements.empty());
  REQUIRE_FALSE(expected.preemptions.empty());
  const std::string expected_text = Describe(expected, queue);

  for (int round = 0; round < 5; ++round) {
    ClusterState shuffled = state;
    std::shuffle(shuffled.nodes.begin(), shuffled.nodes.end(), random);
    std::shuffle(shuffled.running.begin(), shuffled.running.end(), random);
    std::vector<QueuedRun> shuffled_queue = queue;
    std::shuffle(shuffled_queue.begin(), shuffled_queue.end(), random);
    Placer again(shuffled);
    CHECK(Describe(again.PlaceQueue(shuffled_queue), shuffled_queue) == expected_text);
  }

  // A copy of an index of the nodes built once (as the scheduler's cycle keeps one while its
  // nodes do not change) decides exactly as an index built with the placer, again and again:
  // the copies share nothing, so one cycle's allocations never leak into the next.
  const CapacityIndex kept(state.nodes);
  for (int round = 0; round < 3; ++round) {
    Placer from_kept(kept, state);
    CHECK(Describe(from_kept.PlaceQueue(queue), queue) == expected_text);
  }
  CHECK(kept.available_free_units() == CapacityIndex(state.nodes).available_free_units());
}

// What the test believes each node holds, built only from the decisions.
struct Model {
  std::map<std::string, NodeInfo> nodes;
  std::map<std::string, std::set<int>> used;                   // node -> GPUs held
  std::map<std::string, std::vector<NodeAssignment>> running;  // run -> its nodes
  std::map<std::string, QueuedRun> runs;

  void Add(const Placement& placement) {
    REQUIRE(running.count(placement.run_id) == 0);
    const QueuedRun& run = runs.at(placement.run_id);
    std::set<std::string> distinct;
    const NodeInfo& first = nodes.at(placement.nodes.at(0).node);
    for (const NodeAssignment& part : placement.nodes) {
      const NodeInfo& node = nodes.at(part.node);
      REQUIRE(distinct.insert(part.node).second);
      REQUIRE(node.schedulable);
      REQUIRE(node.cluster == first.cluster);
      REQUIRE(node.gpu_type == first.gpu_type);
      if (!run.request.cluster.empty()) REQUIRE(node.cluster == run.request.cluster);
      if (!run.request.gpu_type.empty()) REQUIRE(node.gpu_type == run.request.gpu_type);
      std::vector<int> gpus = part.gpu_indices;
      if (run.request.gpus == 0) {
        REQUIRE(gpus.empty());
        gpus = {0, 1, 2, 3, 4, 5, 6, 7};
      }
      for (int gpu : gpus) REQUIRE(used[part.node].insert(gpu).second);
    }
    int total = 0;
    for (const NodeAssignment& part : placement.nodes) {
      total += static_cast<int>(part.gpu_indices.size());
      REQUIRE(part.gpu_indices.size() == placement.nodes[0].gpu_indices.size());
    }
    REQUIRE(total == run.request.gpus);
    running[placement.run_id] = placement.nodes;
  }

  void Remove(const std::string& run_id) {
    const std::vector<NodeAssignment>& parts = running.at(run_id);
    const bool cpu = runs.at(run_id).request.gpus == 0;
    for (const NodeAssignment& part : parts) {
      if (cpu) {
        used[part.node].clear();
      } else {
        for (int gpu : part.gpu_indices) used[part.node].erase(gpu);
      }
    }
    running.erase(run_id);
  }
};

TEST_CASE("Invariants: random cycles never double-book, and preempt only what they may",
          "[placement][determinism]") {
  std::mt19937 random(11);
  const std::vector<NodeInfo> nodes = RandomNodes(random, 48);
  Placer placer(ClusterState{nodes, {}});
  Model model;
  for (const NodeInfo& node : nodes) model.nodes[node.name] = node;
  std::vector<QueuedRun> queue;
  int next_id = 0;
  int placed = 0;
  int preempted = 0;
  for (int cycle = 0; cycle < 40; ++cycle) {
    while (queue.size() < 150) {
      queue.push_back(RandomRun(random, next_id++));
      model.runs[queue.back().run_id] = queue.back();
    }
    const PlacementDecision decision = placer.PlaceQueue(queue);
    for (const Preemption& preemption : decision.preemptions) {
      const QueuedRun& victim = model.runs.at(preemption.victim_run_id);
      const QueuedRun& winner = model.runs.at(preemption.for_run_id);
      REQUIRE(victim.preemptible);
      REQUIRE(victim.priority < winner.priority);
      model.Remove(victim.run_id);
      queue.push_back(victim);  // requeued
      ++preempted;
    }
    std::set<std::string> started;
    for (const Placement& placement : decision.placements) {
      model.Add(placement);
      started.insert(placement.run_id);
      ++placed;
    }
    queue.erase(std::remove_if(queue.begin(), queue.end(),
                               [&](const QueuedRun& run) { return started.count(run.run_id); }),
                queue.end());
    REQUIRE(decision.placements.size() + decision.waiting.size() ==
            queue.size() + started.size() - decision.preemptions.size());
    for (const auto& [name, node] : model.nodes) {
      REQUIRE(placer.FreeUnits(name) == 8 - static_cast<int>(model.used[name].size()));
    }
    // A third of the running runs end.
    std::vector<std::string> ending;
    for (const auto& [run_id, parts] : model.running) {
      if (random() % 3 == 0) ending.push_back(run_id);
    }
    for (const std::string& run_id : ending) {
      REQUIRE(placer.Release(run_id));
      model.Remove(run_id);
    }
  }
  CHECK(placed > 100);
  CHECK(preempted > 0);
}

}  // namespace determinism_test
}  // namespace tessera::scheduler
