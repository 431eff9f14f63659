// Randomized cycles with teams, quotas, borrowing, priorities and preemption: whatever the
// queue, no GPU is given twice, a gang gets all of its GPUs or none, and a team exceeds its
// quota only with preemptible runs that borrow.

#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/placement/placer.h"

namespace tessera::scheduler {
namespace quota_invariants_test {

const std::vector<std::string> kTeams = {"a", "b", "c", "d", ""};

struct Held {
  std::string team;
  bool preemptible = false;
  bool borrowed = false;
  Priority priority = Priority::kMedium;
  std::vector<NodeAssignment> nodes;
  int gpus = 0;
};

struct Model {
  ClusterState state;
  std::map<std::string, Held> running;
  std::vector<std::string> preempted;  // to queue again
  int borrowed = 0, reclaims = 0, priority_preemptions = 0, quota_waits = 0;

  int Used(const std::string& team, bool borrowed_too) const {
    int used = 0;
    for (const auto& [id, held] : running) {
      if (held.team == team && (borrowed_too || !held.borrowed)) used += held.gpus;
    }
    return used;
  }
  int Quota(const std::string& team) const {
    for (const TeamQuota& quota : state.quotas) {
      if (quota.team == team) return quota.gpus;
    }
    return 0;
  }
};

QueuedRun RandomRun(std::mt19937& random, int index) {
  QueuedRun run;
  run.run_id = absl::StrCat("r", index);
  run.created_at_micros = index;
  run.team = kTeams[random() % kTeams.size()];
  run.priority = static_cast<Priority>(1 + random() % 4);
  run.preemptible = random() % 2 == 0;
  run.share_rank = static_cast<uint32_t>(random() % 3);
  const int sizes[] = {1, 2, 4, 8, 16, 24};
  run.request.gpus = sizes[random() % 6];
  return run;
}

void CheckCycle(Model& model, const std::vector<QueuedRun>& queue,
                const PlacementDecision& decision) {
  std::map<std::string, const QueuedRun*> by_id;
  for (const QueuedRun& run : queue) by_id[run.run_id] = &run;
  std::set<std::string> running_before;
  for (const auto& [id, held] : model.running) running_before.insert(id);
  // Victims leave before the run they make room for is placed; each was eligible before any of
  // them left.
  size_t next_preemption = 0;
  for (const Placement& placement : decision.placements) {
    const QueuedRun& claimant = *by_id.at(placement.run_id);
    std::vector<std::string> victims;
    while (next_preemption < decision.preemptions.size() &&
           decision.preemptions[next_preemption].for_run_id == placement.run_id) {
      const Preemption& preemption = decision.preemptions[next_preemption++];
      auto victim = model.running.find(preemption.victim_run_id);
      REQUIRE(victim != model.running.end());
      // Never a run placed in this same cycle.
      CHECK(running_before.count(preemption.victim_run_id) == 1);
      CHECK(victim->second.preemptible);
      ++(preemption.reclaim ? model.reclaims : model.priority_preemptions);
      if (preemption.reclaim) {
        // Borrowed GPUs go back to another team that is within its quota.
        CHECK(victim->second.team != claimant.team);
        CHECK(model.Used(victim->second.team, true) > model.Quota(victim->second.team));
      } else {
        CHECK(static_cast<int>(victim->second.priority) < static_cast<int>(claimant.priority));
      }
      victims.push_back(preemption.victim_run_id);
    }
    CHECK(placement.after_preemption == !victims.empty());
    for (const std::string& victim : victims) {
      model.preempted.push_back(victim);
      model.running.erase(victim);
    }
    const QueuedRun& run = claimant;
    Held held;
    held.team = run.team;
    held.preemptible = run.preemptible;
    held.borrowed = placement.borrowed;
    held.priority = run.priority;
    held.nodes = placement.nodes;
    for (const NodeAssignment& part : placement.nodes) {
      held.gpus += static_cast<int>(part.gpu_indices.size());
    }
    // A gang gets all it asked for, on whole nodes for multi-node runs.
    CHECK(held.gpus == run.request.gpus);
    if (placement.borrowed) {
      ++model.borrowed;
      CHECK(run.preemptible);  // only preemptible runs borrow
      CHECK_FALSE(placement.after_preemption);
    } else {
      CHECK(model.Used(run.team, true) + held.gpus <= model.Quota(run.team));
    }
    model.running[placement.run_id] = std::move(held);
  }
  CHECK(next_preemption == decision.preemptions.size());
  // No GPU held twice.
  std::set<std::pair<std::string, int>> taken;
  for (const auto& [id, held] : model.running) {
    for (const NodeAssignment& part : held.nodes) {
      for (int gpu : part.gpu_indices) CHECK(taken.insert({part.node, gpu}).second);
    }
  }
  // Quotas hold for everything that does not borrow.
  for (const std::string& team : kTeams) CHECK(model.Used(team, false) <= model.Quota(team));
  // Every queued run is decided once.
  CHECK(decision.placements.size() + decision.waiting.size() == queue.size());
  for (const Waiting& waiting : decision.waiting) {
    const QueuedRun& run = queue[waiting.queue_index];
    if (waiting.reason == WaitReason::kQuotaReached) {
      ++model.quota_waits;
      CHECK_FALSE(run.preemptible);
      CHECK(waiting.quota_used + run.request.gpus > waiting.quota);
    }
  }
}

TEST_CASE("Quotas: randomized cycles keep placement's invariants", "[placement][quota]") {
  const uint32_t seed = GENERATE(1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u);
  std::mt19937 random(seed);
  Model model;
  for (int i = 0; i < 24; ++i) {
    NodeInfo node;
    node.name = absl::StrCat("n", i);
    node.cluster = "c1";
    node.gpu_type = "h100";
    node.gpu_count = 8;
    model.state.nodes.push_back(node);
  }
  // 192 GPUs; quotas for four teams (the fifth has none) that leave room to borrow.
  model.state.quotas = {
      {"a", "c1", "", 64}, {"b", "c1", "", 48}, {"c", "c1", "", 32}, {"d", "c1", "", 16}};
  int next_run = 0;
  std::vector<QueuedRun> queue;
  std::map<std::string, QueuedRun> submitted;
  for (int cycle = 0; cycle < 40; ++cycle) {
    while (queue.size() < 40) {
      queue.push_back(RandomRun(random, next_run++));
      submitted[queue.back().run_id] = queue.back();
    }
    // The scheduler builds a fresh Placer every cycle from what runs.
    ClusterState state = model.state;
    for (const auto& [id, held] : model.running) {
      RunningAllocation allocation;
      allocation.run_id = id;
      allocation.team = held.team;
      allocation.priority = held.priority;
      allocation.preemptible = held.preemptible;
      allocation.nodes = held.nodes;
      state.running.push_back(std::move(allocation));
    }
    Placer placer(state);
    const PlacementDecision decision = placer.PlaceQueue(queue, {.now_micros = cycle});
    CheckCycle(model, queue, decision);
    // Placed runs leave the queue, preempted ones come back; a third of the runs end.
    std::set<std::string> placed;
    for (const Placement& placement : decision.placements) placed.insert(placement.run_id);
    std::erase_if(queue, [&](const QueuedRun& run) { return placed.count(run.run_id) > 0; });
    for (const std::string& id : model.preempted) queue.push_back(submitted.at(id));
    model.preempted.clear();
    for (auto it = model.running.begin(); it != model.running.end();) {
      it = random() % 3 == 0 ? model.running.erase(it) : std::next(it);
    }
  }
}

}  // namespace quota_invariants_test
}  // namespace tessera::scheduler
