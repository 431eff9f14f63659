#pragma once
// How nodes and node events look to a person: the `get nodes` and `get events` tables, the
// lines `get events --follow` prints, and the `describe node` page.

#include <iosfwd>
#include <string>

#include "google/protobuf/repeated_field.h"
#include "tessera/v1/cordon.pb.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::cli {

// NAME CLUSTER GPU TYPE GPUS LIVENESS STATE HEALTH REASON
void PrintNodeTable(std::ostream& out,
                    const google::protobuf::RepeatedPtrField<tessera::v1::Node>& nodes);

// TIME NODE EVENT ACTOR REASON
void PrintNodeEventTable(std::ostream& out,
                         const google::protobuf::RepeatedPtrField<tessera::v1::NodeEvent>& events);

// The header and one event as fixed-width lines, for events printed as they happen.
std::string NodeEventStreamHeader();
std::string FormatNodeEventLine(const tessera::v1::NodeEvent& event);

// Node, GPUs, labels, states, the runs on it and its recent events.
void PrintNodeDescription(std::ostream& out, const tessera::v1::GetNodeResponse& node,
                          const google::protobuf::RepeatedPtrField<tessera::v1::NodeEvent>& events);

}  // namespace tessera::cli
