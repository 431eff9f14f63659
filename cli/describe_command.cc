// mcli describe run|node: everything about one run or node.

#include <memory>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/health_view.h"
#include "cli/node_view.h"
#include "cli/run_view.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::cli {
namespace {

// How many of a node's latest events `describe node` shows.
constexpr int kNodeEventCount = 20;

// A queued run's place in the queue and why it waits, from the scheduler's dry run of its next
// cycle; nothing when the scheduler does not answer (the rest of describe still stands).
void PrintQueuePlace(CommandContext& context, const tessera::v1::Run& run) {
  if (run.status() != tessera::v1::RUN_STATUS_QUEUED) return;
  tessera::v1::GetQueueRequest request;
  request.set_cluster(run.spec().compute().cluster());
  tessera::v1::GetQueueResponse response;
  try {
    Connection& connection = context.connection();
    auto stub = tessera::v1::SchedulerService::NewStub(connection.channel());
    connection.Unary([&](grpc::ClientContext* c) { return stub->GetQueue(c, request, &response); });
  } catch (const CliError& e) {
    context.err() << "(the queue could not be read: " << e.what() << ")\n";
    return;
  }
  for (const auto& entry : response.entries()) {
    if (entry.run().id() != run.id()) continue;
    context.out() << "Queue: position " << entry.position() + 1 << " of " << response.entries_size()
                  << ": " << entry.waiting_reason() << "\n";
    return;
  }
}

int DescribeRun(CommandContext& context, const std::string& name) {
  tessera::v1::DescribeRunRequest request;
  request.set_name(name);
  Connection& connection = context.connection();
  auto stub = tessera::v1::RunService::NewStub(connection.channel());
  tessera::v1::DescribeRunResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->DescribeRun(c, request, &response); });
  if (!PrintIfStructured(context, MessageToJson(response.description()))) {
    PrintRunDescription(context.out(), response.description(), context.terminal_width());
    PrintQueuePlace(context, response.description().run());
  }
  return kExitOk;
}

int DescribeNode(CommandContext& context, const std::string& name) {
  Connection& connection = context.connection();
  tessera::v1::GetNodeRequest node_request;
  node_request.set_name(name);
  auto scheduler = tessera::v1::SchedulerService::NewStub(connection.channel());
  tessera::v1::GetNodeResponse node;
  connection.Unary(
      [&](grpc::ClientContext* c) { return scheduler->GetNode(c, node_request, &node); });

  tessera::v1::ListNodeEventsRequest events_request;
  events_request.mutable_filter()->add_node_names(name);
  events_request.mutable_filter()->set_limit(kNodeEventCount);
  auto cordon = tessera::v1::CordonService::NewStub(connection.channel());
  tessera::v1::ListNodeEventsResponse events;
  connection.Unary(
      [&](grpc::ClientContext* c) { return cordon->ListNodeEvents(c, events_request, &events); });

  if (context.format() != OutputFormat::kTable) {
    Json document = Json::object();
    document["node"] = MessageToJson(node.node());
    document["run_names"] =
        Json(std::vector<std::string>(node.run_names().begin(), node.run_names().end()));
    document["events"] = MessagesToJson(events.events());
    PrintDocument(context.out(), context.format(), document);
    return kExitOk;
  }
  PrintNodeDescription(context.out(), node, events.events());
  context.out() << "\nHealth checks:\n";
  if (auto health = RecentHealth(connection, name, 10); health.ok()) {
    PrintHealthResults(context.out(), *health, "  ");
  } else if (absl::IsPermissionDenied(health.status())) {
    context.out() << "  (health results are shown to operators and admins)\n";
  } else {
    context.out() << "  (the health API did not answer)\n";
  }
  return kExitOk;
}

}  // namespace

void AddDescribeCommands(CLI::App& app, ActionSlot& slot) {
  CLI::App* describe = app.add_subcommand("describe", "Show everything about a run or a node");
  describe->require_subcommand(1);

  auto run_name = std::make_shared<std::string>();
  CLI::App* run = describe->add_subcommand("run", "A run: spec, status, attempts, events");
  run->add_option("NAME", *run_name, "Run name")->required();
  OnParsed(run, slot,
           [run_name](CommandContext& context) { return DescribeRun(context, *run_name); });

  auto node_name = std::make_shared<std::string>();
  CLI::App* node = describe->add_subcommand("node", "A node: GPUs, labels, state, runs, events");
  node->add_option("NAME", *node_name, "Node name")->required();
  OnParsed(node, slot,
           [node_name](CommandContext& context) { return DescribeNode(context, *node_name); });
}

}  // namespace tessera::cli
