// SparePlacement's first pass alone: resumptions after a node fault on the pool's spares keep
// their teams within their quotas, counted over the whole cluster, and stop no borrower for a
// resumption that cannot start there.
#include "scheduler/service/spare_placement.h"

#include <catch2/catch.hpp>

#include "scheduler/placement/proto_convert.h"
#include "tests/unit/scheduler_service/spare_test_nodes.h"

namespace tessera::scheduler {
namespace spare_placement_test {

v1::Node Node(const std::string& name, bool spare = false) {
  return SpareTestNode(name, "h100", spare);
}

// A run of `team` with two nodes' worth of GPUs, requeued after losing a node; it kept `kept`.
v1::Run Resuming(const std::string& id, const std::string& team, const std::string& kept) {
  v1::Run r;
  r.set_id(id);
  r.set_team(team);
  r.set_status(v1::RUN_STATUS_QUEUED);
  r.set_requeued_after(v1::ATTEMPT_END_REASON_NODE_FAILURE);
  r.add_requeued_from_nodes(kept);
  r.mutable_spec()->mutable_compute()->set_cluster("c");
  r.mutable_spec()->mutable_compute()->set_gpus(16);
  r.mutable_spec()->mutable_compute()->set_nodes(2);
  return r;
}

RunningAllocation Holding(const std::string& run, const std::string& team, const std::string& node,
                          bool preemptible = false) {
  return {.run_id = run,
          .preemptible = preemptible,
          .nodes = {{.node = node, .gpu_indices = {0, 1, 2, 3, 4, 5, 6, 7}}},
          .team = team};
}

struct Cluster {
  std::vector<v1::Node> nodes;
  std::set<std::string> suspects;
  ClusterState state;
  std::vector<v1::Run> runs;

  Cluster(std::vector<v1::Node> all, int vision_quota) : nodes(std::move(all)) {
    for (const v1::Node& n : nodes) state.nodes.push_back(NodeInfoFromProto(n));
    state.quotas.push_back(
        {.team = "vision", .cluster = "c", .gpu_type = "", .gpus = vision_quota});
  }
  PlacementDecision Resume() const {
    std::vector<QueuedRun> queue;
    std::vector<const v1::Run*> queued;
    for (const v1::Run& r : runs) {
      queue.push_back(QueuedRunFromProto(r, 0));
      queued.push_back(&r);
    }
    const CapacityIndex index(state.nodes);
    return SparePlacement(nodes, suspects, 0).Resumptions(index, queue, queued, state, {});
  }
};

std::set<std::string> PlacedIds(const PlacementDecision& d) {
  std::set<std::string> ids;
  for (const Placement& p : d.placements) ids.insert(p.run_id);
  return ids;
}

TEST_CASE("a resumption on a spare counts what its team holds elsewhere against the quota") {
  // The run gave up n2 and n3's GPUs when it lost n3; a teammate has taken n4 meanwhile.
  for (const int quota : {16, 24}) {
    Cluster c({Node("n1", /*spare=*/true), Node("n2"), Node("n3"), Node("n4")}, quota);
    c.state.running.push_back(Holding("mate", "vision", "n4"));
    c.runs.push_back(Resuming("r", "vision", "n2"));
    const PlacementDecision d = c.Resume();
    INFO("quota " << quota);
    if (quota == 16) {
      // 8 held + 16 > 16: left to the ordinary pass, which applies the quota as to any run.
      CHECK(d.placements.empty());
    } else {
      REQUIRE(d.placements.size() == 1);
      std::set<std::string> on;
      for (const auto& a : d.placements[0].nodes) on.insert(a.node);
      CHECK(on == std::set<std::string>{"n1", "n2"});
    }
  }
}

TEST_CASE("resumptions of one team in one cycle are charged one after another") {
  Cluster c({Node("n1", true), Node("n2"), Node("n3"), Node("n4", true), Node("n5")}, 24);
  c.runs.push_back(Resuming("a", "vision", "n2"));
  c.runs.push_back(Resuming("b", "vision", "n3"));
  const PlacementDecision d = c.Resume();
  // There are spares and kept nodes for both, but either fits in 24 GPUs, not both.
  const std::set<std::string> placed = PlacedIds(d);
  CHECK(placed.size() == 1);
  CHECK((placed.count("a") + placed.count("b")) == 1);
}

TEST_CASE("no borrower is stopped for a resumption its quota keeps off the spare") {
  for (const int quota : {16, 24}) {
    Cluster c({Node("n1", true), Node("n2"), Node("n3"), Node("n4")}, quota);
    c.state.running.push_back(Holding("mate", "vision", "n4"));
    c.state.running.push_back(Holding("borrower", "speech", "n1", /*preemptible=*/true));
    c.runs.push_back(Resuming("r", "vision", "n2"));
    const PlacementDecision d = c.Resume();
    INFO("quota " << quota);
    if (quota == 16) {
      CHECK(d.placements.empty());
      CHECK(d.preemptions.empty());
    } else {
      REQUIRE(d.placements.size() == 1);
      CHECK(d.placements[0].after_preemption);
      REQUIRE(d.preemptions.size() == 1);
      CHECK(d.preemptions[0].victim_run_id == "borrower");
    }
  }
}

TEST_CASE("without quotas a resumption takes the spare whatever its team holds") {
  Cluster c({Node("n1", true), Node("n2"), Node("n3"), Node("n4")}, 0);
  c.state.quotas.clear();
  c.state.running.push_back(Holding("mate", "vision", "n4"));
  c.runs.push_back(Resuming("r", "vision", "n2"));
  CHECK(PlacedIds(c.Resume()) == std::set<std::string>{"r"});
}

}  // namespace spare_placement_test
}  // namespace tessera::scheduler
