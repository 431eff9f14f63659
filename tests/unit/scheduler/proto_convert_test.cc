#include "scheduler/placement/proto_convert.h"

#include <catch2/catch.hpp>

namespace tessera::scheduler {
namespace proto_convert_test {

tessera::v1::Node ProtoNode(tessera::v1::NodeLiveness liveness,
                            tessera::v1::NodeAdminState admin_state,
                            tessera::v1::NodeHealth health) {
  tessera::v1::Node node;
  node.set_name("n1");
  node.set_cluster("c1");
  node.set_gpu_type("h100");
  node.set_gpu_count(8);
  node.set_liveness(liveness);
  node.set_admin_state(admin_state);
  node.set_health(health);
  return node;
}

TEST_CASE("Proto: only online, schedulable, not unhealthy nodes receive work",
          "[placement][proto]") {
  using namespace tessera::v1;
  CHECK(IsSchedulable(
      ProtoNode(NODE_LIVENESS_ONLINE, NODE_ADMIN_STATE_SCHEDULABLE, NODE_HEALTH_HEALTHY)));
  CHECK(IsSchedulable(
      ProtoNode(NODE_LIVENESS_ONLINE, NODE_ADMIN_STATE_SCHEDULABLE, NODE_HEALTH_UNSPECIFIED)));
  CHECK_FALSE(IsSchedulable(
      ProtoNode(NODE_LIVENESS_LOST, NODE_ADMIN_STATE_SCHEDULABLE, NODE_HEALTH_HEALTHY)));
  CHECK_FALSE(IsSchedulable(
      ProtoNode(NODE_LIVENESS_UNSPECIFIED, NODE_ADMIN_STATE_SCHEDULABLE, NODE_HEALTH_HEALTHY)));
  CHECK_FALSE(IsSchedulable(
      ProtoNode(NODE_LIVENESS_ONLINE, NODE_ADMIN_STATE_CORDONED, NODE_HEALTH_HEALTHY)));
  CHECK_FALSE(IsSchedulable(
      ProtoNode(NODE_LIVENESS_ONLINE, NODE_ADMIN_STATE_DRAINING, NODE_HEALTH_HEALTHY)));
  CHECK_FALSE(IsSchedulable(
      ProtoNode(NODE_LIVENESS_ONLINE, NODE_ADMIN_STATE_SCHEDULABLE, NODE_HEALTH_UNHEALTHY)));
}

TEST_CASE("Proto: node labels give the topology", "[placement][proto]") {
  tessera::v1::Node node =
      ProtoNode(tessera::v1::NODE_LIVENESS_ONLINE, tessera::v1::NODE_ADMIN_STATE_CORDONED,
                tessera::v1::NODE_HEALTH_HEALTHY);
  (*node.mutable_labels())["switch"] = "sw-3";
  (*node.mutable_labels())["rack"] = "r1";
  const NodeInfo info = NodeInfoFromProto(node);
  CHECK(info.name == "n1");
  CHECK(info.cluster == "c1");
  CHECK(info.gpu_type == "h100");
  CHECK(info.gpu_count == 8);
  CHECK(info.network_switch == "sw-3");
  CHECK(info.rack == "r1");
  CHECK_FALSE(info.schedulable);
}

TEST_CASE("Proto: a queued run and a placement as attempt nodes", "[placement][proto]") {
  tessera::v1::Run run;
  run.set_id("run-1");
  run.mutable_created_at()->set_seconds(100);
  run.mutable_created_at()->set_nanos(5000);
  auto* compute = run.mutable_spec()->mutable_compute();
  compute->set_cluster("c1");
  compute->set_gpus(16);
  compute->set_gpu_type("h100");
  compute->add_node_names("n1");
  compute->add_node_names("n2");
  run.mutable_spec()->mutable_scheduling()->set_priority(tessera::v1::PRIORITY_HIGH);
  run.mutable_spec()->mutable_scheduling()->set_preemptible(true);
  const QueuedRun queued = QueuedRunFromProto(run, 0);
  CHECK(queued.run_id == "run-1");
  CHECK(queued.created_at_micros == 100000005);
  CHECK(queued.priority == Priority::kHigh);
  CHECK(queued.preemptible);
  CHECK(queued.request.cluster == "c1");
  CHECK(queued.request.gpus == 16);
  CHECK(queued.request.node_names == std::vector<std::string>{"n1", "n2"});
  run.mutable_spec()->mutable_scheduling()->set_priority(tessera::v1::PRIORITY_UNSPECIFIED);
  CHECK(QueuedRunFromProto(run, 0).priority == Priority::kMedium);
  CHECK(queued.avoid_nodes.empty());
  // The node a hang was blamed on is avoided until the time the run manager set, then no longer.
  run.set_avoid_node("n2");
  run.mutable_avoid_node_until()->set_seconds(200);
  CHECK(QueuedRunFromProto(run, 199999999).avoid_nodes == std::vector<std::string>{"n2"});
  CHECK(QueuedRunFromProto(run, 200000000).avoid_nodes.empty());
  CHECK(PriorityToProto(Priority::kLowest) == tessera::v1::PRIORITY_LOWEST);

  Placement placement{"run-1", {{"n1", 0, {0, 1}}, {"n2", 1, {2, 3}}}, false};
  tessera::v1::Attempt attempt;
  PlacementToAttemptNodes(placement, attempt.mutable_nodes());
  attempt.mutable_started_at()->set_seconds(7);
  const RunningAllocation allocation = AllocationFromProto(run, attempt);
  CHECK(allocation.run_id == "run-1");
  CHECK(allocation.started_at_micros == 7000000);
  REQUIRE(allocation.nodes.size() == 2);
  CHECK(allocation.nodes[1].node == "n2");
  CHECK(allocation.nodes[1].node_rank == 1);
  CHECK(allocation.nodes[1].gpu_indices == std::vector<int>{2, 3});
}

}  // namespace proto_convert_test
}  // namespace tessera::scheduler
