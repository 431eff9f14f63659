// mcli health sweep|sweeps|show, mcli get health|sweeps, mcli admin inject-fault.

#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/health_view.h"
#include "cli/names.h"
#include "tessera/v1/health.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::cli {
namespace {

using tessera::v1::HealthService;

struct SweepOptions {
  std::vector<std::string> nodes;
  bool wait = false;
  int timeout_seconds = 300;
};

tessera::v1::GetSweepResponse FetchSweep(Connection& connection, const std::string& id) {
  auto stub = HealthService::NewStub(connection.channel());
  tessera::v1::GetSweepRequest request;
  request.set_id(id);
  tessera::v1::GetSweepResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->GetSweep(c, request, &response); });
  return response;
}

int StartSweep(CommandContext& context, const SweepOptions& options) {
  tessera::v1::StartSweepRequest request;
  request.set_idempotency_key(NewUuid());
  for (const auto& n : options.nodes) {
    for (auto part : absl::StrSplit(n, ',', absl::SkipEmpty()))
      request.add_node_names(std::string(part));
  }
  Connection& connection = context.connection();
  auto stub = HealthService::NewStub(connection.channel());
  tessera::v1::StartSweepResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->StartSweep(c, request, &response); });
  const std::string id = response.sweep().id();
  if (!options.wait) {
    if (!PrintIfStructured(context, MessageToJson(response.sweep()))) {
      context.out() << "Started sweep " << id << " of " << response.sweep().node_names_size()
                    << " node(s); see it with mcli health show " << id << "\n";
    }
    return kExitOk;
  }
  tessera::v1::GetSweepResponse sweep;
  for (int waited = 0;; ++waited) {
    sweep = FetchSweep(connection, id);
    if (sweep.sweep().state() != tessera::v1::SWEEP_STATE_RUNNING) break;
    if (waited >= options.timeout_seconds * 5) {
      throw CliError(kExitFailure, "sweep " + id + " still running after " +
                                       std::to_string(options.timeout_seconds) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!PrintIfStructured(context, MessageToJson(sweep))) PrintSweep(context.out(), sweep);
  return kExitOk;
}

int ListSweeps(CommandContext& context, int limit) {
  Connection& connection = context.connection();
  auto stub = HealthService::NewStub(connection.channel());
  tessera::v1::ListSweepsRequest request;
  request.set_limit(limit);
  tessera::v1::ListSweepsResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->ListSweeps(c, request, &response); });
  if (!PrintIfStructured(context, MessagesToJson(response.sweeps()))) {
    PrintSweeps(context.out(), response.sweeps());
  }
  return kExitOk;
}

int ShowSweep(CommandContext& context, const std::string& id) {
  auto sweep = FetchSweep(context.connection(), id);
  if (!PrintIfStructured(context, MessageToJson(sweep))) PrintSweep(context.out(), sweep);
  return kExitOk;
}

struct ResultOptions {
  std::vector<std::string> nodes;
  std::string sweep;
  int limit = 50;
};

int ListResults(CommandContext& context, const ResultOptions& options) {
  Connection& connection = context.connection();
  auto stub = HealthService::NewStub(connection.channel());
  tessera::v1::ListHealthResultsRequest request;
  for (const auto& n : options.nodes) request.add_node_names(n);
  request.set_sweep_id(options.sweep);
  request.set_limit(options.limit);
  tessera::v1::ListHealthResultsResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->ListHealthResults(c, request, &response); });
  if (!PrintIfStructured(context, MessagesToJson(response.results()))) {
    PrintHealthResults(context.out(), response.results());
  }
  return kExitOk;
}

struct FaultOptions {
  std::string node;
  std::string label;  // KEY=VALUE: every node carrying it instead of one
  std::string kind;
  int gpu = 0;
};

// "slow:0.3" -> SLOW with factor 0.3; "netdrop:20" -> NETDROP for 20 s; "xid:48" -> XID 48.
tessera::v1::InjectFaultRequest ParseFault(const FaultOptions& o) {
  tessera::v1::InjectFaultRequest request;
  request.set_node_name(o.node);
  request.set_gpu_index(o.gpu);
  const std::vector<std::string> parts = absl::StrSplit(o.kind, absl::MaxSplits(':', 1));
  const std::string& kind = parts[0];
  double value = 0;
  const bool has_value = parts.size() > 1;
  if (has_value && !absl::SimpleAtod(parts[1], &value)) {
    throw CliError(kExitUsage, "--kind: \"" + parts[1] + "\" after " + kind + ": is not a number");
  }
  if (kind == "xid") {
    request.set_kind(tessera::v1::FAULT_KIND_XID);
    request.set_factor(has_value ? value : 79);
  } else if (kind == "ecc") {
    request.set_kind(tessera::v1::FAULT_KIND_ECC);
  } else if (kind == "slow") {
    if (!has_value || value <= 0 || value >= 1) {
      throw CliError(kExitUsage,
                     "--kind slow:FACTOR: the fraction of normal speed the node keeps, "
                     "between 0 and 1 (like slow:0.3)");
    }
    request.set_kind(tessera::v1::FAULT_KIND_SLOW);
    request.set_factor(value);
  } else if (kind == "hang") {
    request.set_kind(tessera::v1::FAULT_KIND_HANG);
  } else if (kind == "crash") {
    request.set_kind(tessera::v1::FAULT_KIND_CRASH);
  } else if (kind == "netdrop") {
    request.set_kind(tessera::v1::FAULT_KIND_NETDROP);
    request.set_seconds(has_value ? value : 30);
  } else if (kind == "link-down") {
    if (has_value && value <= 0) {
      throw CliError(kExitUsage,
                     "--kind link-down:SECONDS: how long the link stays down, above 0 (without "
                     "SECONDS: until cleared)");
    }
    request.set_kind(tessera::v1::FAULT_KIND_LINK_DOWN);
    request.set_seconds(has_value ? value : 0);
  } else if (kind == "clear") {
    request.set_kind(tessera::v1::FAULT_KIND_CLEAR);
  } else {
    throw CliError(kExitUsage, "--kind: \"" + o.kind +
                                   "\" is not one of xid[:CODE], ecc, slow:FACTOR, hang, crash, "
                                   "netdrop[:SECONDS], link-down[:SECONDS], clear");
  }
  return request;
}

// The nodes that carry `label` (KEY=VALUE), by name: a fault of what they share (a switch, a
// rack) simulated on each of them.
std::vector<std::string> NodesLabelled(Connection& connection, const std::string& label) {
  const std::vector<std::string> kv = absl::StrSplit(label, absl::MaxSplits('=', 1));
  if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) {
    throw CliError(kExitUsage,
                   "--label: expected KEY=VALUE (like switch=sw-2), got \"" + label + "\"");
  }
  auto stub = tessera::v1::SchedulerService::NewStub(connection.channel());
  tessera::v1::ListNodesRequest request;
  tessera::v1::ListNodesResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->ListNodes(c, request, &response); });
  std::vector<std::string> names;
  for (const auto& n : response.nodes()) {
    const auto it = n.labels().find(kv[0]);
    if (it != n.labels().end() && it->second == kv[1]) names.push_back(n.name());
  }
  if (names.empty()) throw CliError(kExitFailure, "no node carries the label " + label);
  return names;
}

int InjectFault(CommandContext& context, const FaultOptions& options) {
  if (options.node.empty() == options.label.empty()) {
    throw CliError(kExitUsage, "name one NODE or give --label KEY=VALUE, not both");
  }
  const tessera::v1::InjectFaultRequest parsed = ParseFault(options);
  Connection& connection = context.connection();
  const std::vector<std::string> nodes = options.label.empty()
                                             ? std::vector<std::string>{options.node}
                                             : NodesLabelled(connection, options.label);
  auto stub = HealthService::NewStub(connection.channel());
  for (const std::string& node : nodes) {
    tessera::v1::InjectFaultRequest request = parsed;
    request.set_node_name(node);
    request.set_idempotency_key(NewUuid());
    tessera::v1::InjectFaultResponse response;
    connection.Unary(
        [&](grpc::ClientContext* c) { return stub->InjectFault(c, request, &response); });
    context.out() << "Injected " << options.kind << " into node " << node << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddHealthCommands(CLI::App& app, ActionSlot& slot) {
  CLI::App* health = app.add_subcommand("health", "Health checks: canary sweeps and their results");
  health->require_subcommand(1);
  auto sweep = std::make_shared<SweepOptions>();
  CLI::App* start = health->add_subcommand(
      "sweep", "Check nodes now (admins): compute stress, then all-reduce between neighbours");
  start->add_option("--nodes", sweep->nodes, "Nodes to check (default: every node ready for it)");
  start->add_flag("--wait", sweep->wait, "Wait for the sweep and show its findings");
  start->add_option("--timeout", sweep->timeout_seconds,
                    "With --wait: give up after this many seconds");
  OnParsed(start, slot, [sweep](CommandContext& context) { return StartSweep(context, *sweep); });

  auto limit = std::make_shared<int>(20);
  CLI::App* sweeps = health->add_subcommand("sweeps", "Recent sweeps");
  sweeps->add_option("--limit", *limit, "How many (default 20)");
  OnParsed(sweeps, slot, [limit](CommandContext& context) { return ListSweeps(context, *limit); });

  auto id = std::make_shared<std::string>();
  CLI::App* show = health->add_subcommand("show", "A sweep: its nodes, findings and every result");
  show->add_option("SWEEP", *id, "The sweep's ID")->required();
  OnParsed(show, slot, [id](CommandContext& context) { return ShowSweep(context, *id); });
}

void AddGetHealthCommands(CLI::App* get, ActionSlot& slot) {
  auto results = std::make_shared<ResultOptions>();
  CLI::App* get_health = get->add_subcommand("health", "List health check results, newest first");
  get_health->add_option("--node", results->nodes, "Only this node's (repeatable)");
  get_health->add_option("--sweep", results->sweep, "Only this sweep's");
  get_health->add_option("--limit", results->limit, "How many (default 50)");
  OnParsed(get_health, slot,
           [results](CommandContext& context) { return ListResults(context, *results); });
  auto limit = std::make_shared<int>(20);
  CLI::App* get_sweeps = get->add_subcommand("sweeps", "List recent health sweeps");
  get_sweeps->add_option("--limit", *limit, "How many (default 20)");
  OnParsed(get_sweeps, slot,
           [limit](CommandContext& context) { return ListSweeps(context, *limit); });
}

void AddInjectFaultCommand(CLI::App* admin, ActionSlot& slot) {
  auto fault = std::make_shared<FaultOptions>();
  CLI::App* inject = admin->add_subcommand(
      "inject-fault",
      "Inject a fault into a node whose worker allows it (for testing remediation)");
  inject->add_option("NODE", fault->node, "The node");
  inject->add_option("--label", fault->label,
                     "KEY=VALUE: every node carrying this label instead (switch=sw-2: a switch's "
                     "nodes)");
  inject
      ->add_option("--kind", fault->kind,
                   "xid[:CODE], ecc, slow:FACTOR, hang, crash, netdrop[:SECONDS], "
                   "link-down[:SECONDS] or clear")
      ->required();
  inject->add_option("--gpu", fault->gpu, "GPU index for xid and ecc (default 0)");
  OnParsed(inject, slot, [fault](CommandContext& context) { return InjectFault(context, *fault); });
}

absl::StatusOr<google::protobuf::RepeatedPtrField<tessera::v1::HealthCheckResult>> RecentHealth(
    Connection& connection, const std::string& node, int limit) {
  auto stub = HealthService::NewStub(connection.channel());
  tessera::v1::ListHealthResultsRequest request;
  request.add_node_names(node);
  request.set_limit(limit);
  tessera::v1::ListHealthResultsResponse response;
  const auto context = connection.UnaryContext();
  const grpc::Status st = stub->ListHealthResults(context.get(), request, &response);
  if (!st.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
  }
  return response.results();
}

}  // namespace tessera::cli
