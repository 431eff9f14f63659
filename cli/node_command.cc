// mcli cordon|uncordon|drain NODE: take a node out of scheduling, put it back, or let its runs
// finish while nothing new is placed. Every change is recorded as a node event with its reason.
// mcli label NODE KEY=VALUE... KEY-: an operator's labels, which the node's own registrations
// cannot change.

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/names.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::cli {
namespace {

using tessera::v1::CordonService;

struct NodeOptions {
  std::string node;
  std::string reason;
};

// Prints what the node looks like after the change.
void PrintNodeResult(CommandContext& context, const std::string& verb,
                     const google::protobuf::Message& response, const tessera::v1::Node& node) {
  if (PrintIfStructured(context, MessageToJson(response))) return;
  context.out() << verb << " node " << node.name() << " (" << ShortName(node.admin_state())
                << ")\n";
}

int Cordon(CommandContext& context, const NodeOptions& options) {
  if (options.reason.empty()) ThrowUsage("cordon needs a reason: --reason \"...\"");
  tessera::v1::CordonNodeRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_node_name(options.node);
  request.set_reason(options.reason);
  Connection& connection = context.connection();
  auto stub = CordonService::NewStub(connection.channel());
  tessera::v1::CordonNodeResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->CordonNode(c, request, &response); });
  PrintNodeResult(context, "Cordoned", response, response.node());
  return kExitOk;
}

int Uncordon(CommandContext& context, const NodeOptions& options) {
  tessera::v1::UncordonNodeRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_node_name(options.node);
  request.set_reason(options.reason);
  Connection& connection = context.connection();
  auto stub = CordonService::NewStub(connection.channel());
  tessera::v1::UncordonNodeResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->UncordonNode(c, request, &response); });
  PrintNodeResult(context, "Uncordoned", response, response.node());
  return kExitOk;
}

int Drain(CommandContext& context, const NodeOptions& options) {
  tessera::v1::DrainNodeRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_node_name(options.node);
  request.set_reason(options.reason);
  Connection& connection = context.connection();
  auto stub = CordonService::NewStub(connection.channel());
  tessera::v1::DrainNodeResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->DrainNode(c, request, &response); });
  PrintNodeResult(context, "Draining", response, response.node());
  return kExitOk;
}

struct LabelOptions {
  std::string node;
  std::vector<std::string> changes;  // KEY=VALUE sets, KEY- removes
};

int Label(CommandContext& context, const LabelOptions& options) {
  tessera::v1::SetNodeLabelsRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_name(options.node);
  for (const std::string& change : options.changes) {
    const size_t eq = change.find('=');
    if (eq == std::string::npos && change.size() > 1 && change.back() == '-') {
      (*request.mutable_labels())[change.substr(0, change.size() - 1)] = "";  // removes it
    } else if (eq != std::string::npos && eq > 0 && eq + 1 < change.size()) {
      (*request.mutable_labels())[change.substr(0, eq)] = change.substr(eq + 1);
    } else {
      ThrowUsage("label \"" + change + "\": KEY=VALUE sets a label, KEY- removes it");
    }
  }
  Connection& connection = context.connection();
  auto stub = tessera::v1::SchedulerService::NewStub(connection.channel());
  tessera::v1::SetNodeLabelsResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->SetNodeLabels(c, request, &response); });
  if (PrintIfStructured(context, MessageToJson(response))) return kExitOk;
  context.out() << "Labelled node " << response.node().name() << ":";
  for (const auto& [key, value] : request.labels()) {
    context.out() << " " << key << (value.empty() ? "-" : "=" + value);
  }
  context.out() << "\n";
  return kExitOk;
}

// Adds one NODE [--reason R] command running `run`.
void AddNodeCommand(CLI::App& app, ActionSlot& slot, const std::string& name,
                    const std::string& description, bool reason_required,
                    int (*run)(CommandContext&, const NodeOptions&)) {
  auto options = std::make_shared<NodeOptions>();
  CLI::App* command = app.add_subcommand(name, description);
  command->add_option("NODE", options->node, "Node name")->required();
  CLI::Option* reason =
      command->add_option("--reason", options->reason, "Why (kept in the node's events)");
  if (reason_required) reason->required();
  OnParsed(command, slot,
           [options, run](CommandContext& context) { return run(context, *options); });
}

}  // namespace

void AddNodeCommands(CLI::App& app, ActionSlot& slot) {
  AddNodeCommand(app, slot, "cordon", "Stop placing runs on a node", true, Cordon);
  AddNodeCommand(app, slot, "uncordon", "Let runs be placed on a node again", false, Uncordon);
  AddNodeCommand(app, slot, "drain", "Let a node's runs finish, placing nothing new on it", false,
                 Drain);
  auto label = std::make_shared<LabelOptions>();
  CLI::App* command = app.add_subcommand(
      "label", "Set or remove a node's labels (operators); the node's own word cannot change them");
  command->add_option("NODE", label->node, "Node name")->required();
  command->add_option("LABELS", label->changes, "KEY=VALUE sets a label, KEY- removes it")
      ->required();
  OnParsed(command, slot, [label](CommandContext& context) { return Label(context, *label); });
}

}  // namespace tessera::cli
