#include "cli/node_view.h"

#include <cstdio>
#include <map>
#include <ostream>

#include "cli/names.h"
#include "cli/table.h"
#include "cli/time_format.h"

namespace tessera::cli {
namespace {

using tessera::v1::Node;
using tessera::v1::NodeEvent;

std::string Actor(const tessera::v1::Actor& actor) {
  if (!actor.name().empty()) return actor.name();
  return ShortName(actor.kind());
}

std::string Bytes(int64_t bytes) {
  if (bytes <= 0) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return text;
}

// Column widths of the streamed event lines.
constexpr size_t kTimeWidth = 19;
constexpr size_t kNodeWidth = 20;
constexpr size_t kTypeWidth = 22;
constexpr size_t kActorWidth = 16;

}  // namespace

void PrintNodeTable(std::ostream& out, const google::protobuf::RepeatedPtrField<Node>& nodes) {
  Table table({"NAME", "CLUSTER", "GPU TYPE", "GPUS", "LIVENESS", "STATE", "HEALTH", "REASON"});
  for (const Node& node : nodes) {
    table.AddRow({node.name(), OrDash(node.cluster()), OrDash(node.gpu_type()),
                  std::to_string(node.gpu_count()), ShortName(node.liveness()),
                  ShortName(node.admin_state()), ShortName(node.health()),
                  node.spare() ? "hot spare: " + OrDash(node.spare_status())
                               : OrDash(node.status_reason())});
  }
  table.Print(out);
}

void PrintNodeEventTable(std::ostream& out,
                         const google::protobuf::RepeatedPtrField<NodeEvent>& events) {
  Table table({"TIME", "NODE", "EVENT", "ACTOR", "REASON"});
  table.SetMaxWidth(4, 80);
  for (const NodeEvent& event : events) {
    table.AddRow({FormatTimestamp(event.time()), event.node_name(), ShortName(event.type()),
                  Actor(event.actor()), OrDash(event.reason())});
  }
  table.Print(out);
}

std::string NodeEventStreamHeader() {
  std::string line = PadRight("TIME", kTimeWidth) + "  " + PadRight("NODE", kNodeWidth) + "  " +
                     PadRight("EVENT", kTypeWidth) + "  " + PadRight("ACTOR", kActorWidth) +
                     "  REASON";
  return line;
}

std::string FormatNodeEventLine(const NodeEvent& event) {
  std::string line = PadRight(FormatTimestamp(event.time()), kTimeWidth) + "  " +
                     PadRight(event.node_name(), kNodeWidth) + "  " +
                     PadRight(ShortName(event.type()), kTypeWidth) + "  " +
                     PadRight(Actor(event.actor()), kActorWidth) + "  " +
                     FitCell(OrDash(event.reason()), 120);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

void PrintNodeDescription(std::ostream& out, const tessera::v1::GetNodeResponse& response,
                          const google::protobuf::RepeatedPtrField<NodeEvent>& events) {
  const Node& node = response.node();
  Fields fields;
  fields.Add("Node", node.name());
  fields.Add("Cluster", OrDash(node.cluster()));
  fields.Add("Address", OrDash(node.address()));
  fields.Add("GPUs", std::to_string(node.gpu_count()) +
                         (node.gpu_type().empty() ? "" : " x " + node.gpu_type()));
  fields.Add("CPUs", std::to_string(node.cpu_count()));
  fields.Add("Memory", Bytes(node.memory_bytes()));
  fields.Add("Liveness", ShortName(node.liveness()));
  fields.Add("State", ShortName(node.admin_state()));
  fields.Add("Health", ShortName(node.health()));
  fields.Add("Reason", OrDash(node.status_reason()));
  if (node.spare()) fields.Add("Hot spare", OrDash(node.spare_status()));
  fields.Add("Registered", FormatTimestamp(node.registered_at()));
  fields.Add("Last heartbeat", FormatTimestamp(node.last_heartbeat_at()));
  fields.Add("Lease expires", FormatTimestamp(node.lease_expires_at()));
  fields.Add("Incarnation", std::to_string(node.incarnation()));
  fields.Add("Worker version", OrDash(node.worker_version()));
  fields.Add("Fault injection", node.fault_injection_allowed() ? "allowed" : "not allowed");
  fields.Print(out);

  out << "\nGPUs:\n";
  if (node.gpus().empty()) {
    out << "  (none)\n";
  } else {
    Table gpus({"INDEX", "MODEL", "MEMORY", "UUID", "SIMULATED"}, 0);
    for (const auto& gpu : node.gpus()) {
      gpus.AddRow({std::to_string(gpu.index()), OrDash(gpu.model()), Bytes(gpu.memory_bytes()),
                   OrDash(gpu.uuid()), gpu.simulated() ? "yes" : "no"});
    }
    gpus.Print(out, "  ");
  }

  out << "\nLabels:\n";
  if (node.labels().empty()) {
    out << "  (none)\n";
  } else {
    std::map<std::string, std::string> sorted(node.labels().begin(), node.labels().end());
    Fields labels;
    for (const auto& [key, value] : sorted) labels.Add(key, value);
    labels.Print(out, "  ");
  }

  out << "\nRuns:\n";
  if (response.run_names().empty()) out << "  (none)\n";
  for (const std::string& name : response.run_names()) out << "  " << name << "\n";

  out << "\nRecent events:\n";
  if (events.empty()) {
    out << "  (none)\n";
  } else {
    Table table({"TIME", "EVENT", "ACTOR", "REASON"});
    table.SetMaxWidth(3, 80);
    for (const NodeEvent& event : events) {
      table.AddRow({FormatTimestamp(event.time()), ShortName(event.type()), Actor(event.actor()),
                    OrDash(event.reason())});
    }
    table.Print(out, "  ");
  }
}

}  // namespace tessera::cli
