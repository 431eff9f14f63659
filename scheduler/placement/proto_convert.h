#pragma once
// The API messages at the scheduler's boundary, mapped onto the placement structs and back.

#include <cstdint>

#include "google/protobuf/repeated_field.h"
#include "google/protobuf/timestamp.pb.h"
#include "scheduler/placement/types.h"
#include "tessera/v1/nodes.pb.h"
#include "tessera/v1/run_spec.pb.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::scheduler {

// UNSPECIFIED (and unknown values) count as MEDIUM, as mcli's "auto" does.
Priority PriorityFromProto(tessera::v1::Priority priority);
tessera::v1::Priority PriorityToProto(Priority priority);

// Whether new work may be placed on the node: worker online, admin SCHEDULABLE, health not
// UNHEALTHY (a node not yet checked counts as healthy).
bool IsSchedulable(const tessera::v1::Node& node);

// Labels "switch" and "rack" become the node's topology.
NodeInfo NodeInfoFromProto(const tessera::v1::Node& node);

ResourceRequest RequestFromProto(const tessera::v1::ComputeSpec& compute);

int64_t TimestampToMicros(const google::protobuf::Timestamp& timestamp);

// A queued run: its id, creation time, compute request and scheduling settings, and the node it
// keeps off at `now_micros` (Run.avoid_node).
QueuedRun QueuedRunFromProto(const tessera::v1::Run& run, int64_t now_micros);

// A running attempt of `run`, as an allocation (its nodes and GPU indices).
RunningAllocation AllocationFromProto(const tessera::v1::Run& run,
                                      const tessera::v1::Attempt& attempt);

// The placement's nodes in the attempt's form.
void PlacementToAttemptNodes(const Placement& placement,
                             google::protobuf::RepeatedPtrField<tessera::v1::AttemptNode>* nodes);

}  // namespace tessera::scheduler
