#include "scheduler/placement/proto_convert.h"

namespace tessera::scheduler {

Priority PriorityFromProto(tessera::v1::Priority priority) {
  switch (priority) {
    case tessera::v1::PRIORITY_LOWEST:
      return Priority::kLowest;
    case tessera::v1::PRIORITY_LOW:
      return Priority::kLow;
    case tessera::v1::PRIORITY_HIGH:
      return Priority::kHigh;
    default:
      return Priority::kMedium;
  }
}

tessera::v1::Priority PriorityToProto(Priority priority) {
  return static_cast<tessera::v1::Priority>(static_cast<int>(priority));
}

bool IsSchedulable(const tessera::v1::Node& node) {
  return node.liveness() == tessera::v1::NODE_LIVENESS_ONLINE &&
         node.admin_state() == tessera::v1::NODE_ADMIN_STATE_SCHEDULABLE &&
         node.health() != tessera::v1::NODE_HEALTH_UNHEALTHY;
}

NodeInfo NodeInfoFromProto(const tessera::v1::Node& node) {
  NodeInfo info;
  info.name = node.name();
  info.cluster = node.cluster();
  info.gpu_type = node.gpu_type();
  info.gpu_count = node.gpu_count();
  if (auto it = node.labels().find("rack"); it != node.labels().end()) info.rack = it->second;
  if (auto it = node.labels().find("switch"); it != node.labels().end()) {
    info.network_switch = it->second;
  }
  info.schedulable = IsSchedulable(node);
  return info;
}

ResourceRequest RequestFromProto(const tessera::v1::ComputeSpec& compute) {
  ResourceRequest request;
  request.cluster = compute.cluster();
  request.gpu_type = compute.gpu_type();
  request.gpus = compute.gpus();
  request.nodes = compute.nodes();
  request.node_names.assign(compute.node_names().begin(), compute.node_names().end());
  return request;
}

int64_t TimestampToMicros(const google::protobuf::Timestamp& timestamp) {
  return timestamp.seconds() * 1000000 + timestamp.nanos() / 1000;
}

QueuedRun QueuedRunFromProto(const tessera::v1::Run& run, int64_t now_micros) {
  QueuedRun queued;
  if (!run.avoid_node().empty() && TimestampToMicros(run.avoid_node_until()) > now_micros) {
    queued.avoid_nodes.push_back(run.avoid_node());
  }
  queued.run_id = run.id();
  queued.created_at_micros = TimestampToMicros(run.created_at());
  queued.priority = PriorityFromProto(run.spec().scheduling().priority());
  queued.preemptible = run.spec().scheduling().preemptible();
  queued.request = RequestFromProto(run.spec().compute());
  queued.team = run.team();
  return queued;
}

RunningAllocation AllocationFromProto(const tessera::v1::Run& run,
                                      const tessera::v1::Attempt& attempt) {
  RunningAllocation allocation;
  allocation.run_id = run.id();
  allocation.team = run.team();
  allocation.priority = PriorityFromProto(run.spec().scheduling().priority());
  allocation.preemptible = run.spec().scheduling().preemptible();
  allocation.started_at_micros =
      TimestampToMicros(attempt.has_started_at() ? attempt.started_at() : attempt.created_at());
  for (const tessera::v1::AttemptNode& node : attempt.nodes()) {
    NodeAssignment assignment;
    assignment.node = node.node_name();
    assignment.node_rank = node.node_rank();
    assignment.gpu_indices.assign(node.gpu_indices().begin(), node.gpu_indices().end());
    allocation.nodes.push_back(std::move(assignment));
  }
  return allocation;
}

void PlacementToAttemptNodes(const Placement& placement,
                             google::protobuf::RepeatedPtrField<tessera::v1::AttemptNode>* nodes) {
  for (const NodeAssignment& assignment : placement.nodes) {
    tessera::v1::AttemptNode* node = nodes->Add();
    node->set_node_name(assignment.node);
    node->set_node_rank(assignment.node_rank);
    for (int index : assignment.gpu_indices) node->add_gpu_indices(index);
  }
}

}  // namespace tessera::scheduler
