// mcli get runs|nodes|events: lists as tables, or as JSON/YAML arrays with -o.

#include <memory>

#include "absl/time/clock.h"
#include "base/clock.h"
#include "base/timestamps.h"
#include "cli/commands.h"
#include "cli/names.h"
#include "cli/node_view.h"
#include "cli/run_view.h"
#include "cli/stream_reconnect.h"
#include "cli/time_format.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::cli {
namespace {

struct GetRunsOptions {
  std::vector<std::string> globs;
  std::vector<std::string> statuses;
  std::string user;
  std::string cluster;
  std::string gpu_type;
  std::string before;
  std::string after;
  int limit = 0;
  bool latest = false;
  std::vector<std::string> metadata;  // KEY=VALUE
};

tessera::v1::RunFilter RunFilterFrom(const GetRunsOptions& options) {
  tessera::v1::RunFilter filter;
  for (const std::string& glob : options.globs) filter.add_name_globs(glob);
  for (const std::string& status : options.statuses) {
    filter.add_statuses(ParseEnum<tessera::v1::RunStatus>("--status", status));
  }
  filter.set_user(options.user);
  filter.set_cluster(options.cluster);
  filter.set_gpu_type(options.gpu_type);
  const absl::Time now = absl::Now();
  if (!options.before.empty()) {
    *filter.mutable_created_before() = ToProtoTime(ParseTimeArg("--before", options.before, now));
  }
  if (!options.after.empty()) {
    *filter.mutable_created_after() = ToProtoTime(ParseTimeArg("--after", options.after, now));
  }
  filter.set_limit(options.limit);
  filter.set_latest(options.latest);
  for (const std::string& pair : options.metadata) {
    const size_t equals = pair.find('=');
    if (equals == 0 || equals == std::string::npos) {
      ThrowUsage("-m/--metadata: expected KEY=VALUE, got \"" + pair + "\"");
    }
    (*filter.mutable_metadata())[pair.substr(0, equals)] = pair.substr(equals + 1);
  }
  return filter;
}

int GetRuns(CommandContext& context, const GetRunsOptions& options) {
  tessera::v1::ListRunsRequest request;
  *request.mutable_filter() = RunFilterFrom(options);
  Connection& connection = context.connection();
  auto stub = tessera::v1::RunService::NewStub(connection.channel());
  // Page by page. Lists carry runs without their commands, env and parameters (even as JSON or
  // YAML: `mcli describe run NAME -o yaml` shows the whole run).
  const int limit = request.filter().limit();
  google::protobuf::RepeatedPtrField<tessera::v1::Run> runs;
  do {
    tessera::v1::ListRunsResponse response;
    connection.Unary([&](grpc::ClientContext* c) { return stub->ListRuns(c, request, &response); });
    for (auto& r : *response.mutable_runs()) *runs.Add() = std::move(r);
    request.set_page_token(response.next_page_token());
    if (limit > 0) request.mutable_filter()->set_limit(limit - runs.size());
  } while (!request.page_token().empty() && (limit == 0 || runs.size() < limit));
  if (!PrintIfStructured(context, MessagesToJson(runs))) PrintRunTable(context.out(), runs);
  return kExitOk;
}

struct GetNodesOptions {
  std::string cluster;
  std::string gpu_type;
  std::vector<std::string> names;
};

int GetNodes(CommandContext& context, const GetNodesOptions& options) {
  tessera::v1::ListNodesRequest request;
  request.mutable_filter()->set_cluster(options.cluster);
  request.mutable_filter()->set_gpu_type(options.gpu_type);
  for (const std::string& name : options.names) request.mutable_filter()->add_names(name);
  Connection& connection = context.connection();
  auto stub = tessera::v1::SchedulerService::NewStub(connection.channel());
  tessera::v1::ListNodesResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->ListNodes(c, request, &response); });
  if (!PrintIfStructured(context, MessagesToJson(response.nodes()))) {
    PrintNodeTable(context.out(), response.nodes());
  }
  return kExitOk;
}

struct GetEventsOptions {
  std::vector<std::string> nodes;
  int limit = 0;
  bool follow = false;
};

// Prints node events as the server streams them, until it ends the stream or the user stops
// mcli (Ctrl-C).
int FollowEvents(CommandContext& context, const tessera::v1::NodeEventFilter& filter) {
  Connection& connection = context.connection();
  auto stub = tessera::v1::CordonService::NewStub(connection.channel());
  tessera::v1::WatchNodeEventsRequest request;
  *request.mutable_filter() = filter;
  if (context.format() == OutputFormat::kTable) {
    context.out() << NodeEventStreamHeader() << "\n";
    context.out().flush();
  }
  // A watch the server ends (its lifetime, a restart) goes on after the last event shown.
  StreamReconnects reconnects(context.err(), "the node events", std::make_shared<SystemClock>());
  grpc::Status ended;
  do {
    const std::unique_ptr<grpc::ClientContext> stream_context = connection.StreamContext();
    auto reader = stub->WatchNodeEvents(stream_context.get(), request);
    tessera::v1::NodeEvent event;
    while (reader->Read(&event)) {
      reconnects.Received();
      request.mutable_filter()->set_after_id(event.id());
      // The limit was for the past events shown first; after them there is none.
      request.mutable_filter()->set_limit(0);
      if (context.format() == OutputFormat::kTable) {
        context.out() << FormatNodeEventLine(event) << "\n";
        context.out().flush();
      } else {
        PrintStreamedDocument(context.out(), context.format(), MessageToJson(event));
      }
    }
    ended = reader->Finish();
  } while (reconnects.Again(ended));
  connection.Check(ended);
  return kExitOk;
}

int GetEvents(CommandContext& context, const GetEventsOptions& options) {
  tessera::v1::NodeEventFilter filter;
  for (const std::string& node : options.nodes) filter.add_node_names(node);
  filter.set_limit(options.limit);
  if (options.follow) return FollowEvents(context, filter);

  tessera::v1::ListNodeEventsRequest request;
  *request.mutable_filter() = filter;
  Connection& connection = context.connection();
  auto stub = tessera::v1::CordonService::NewStub(connection.channel());
  tessera::v1::ListNodeEventsResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->ListNodeEvents(c, request, &response); });
  if (!PrintIfStructured(context, MessagesToJson(response.events()))) {
    PrintNodeEventTable(context.out(), response.events());
  }
  return kExitOk;
}

}  // namespace

void AddGetCommands(CLI::App& app, ActionSlot& slot) {
  CLI::App* get = app.add_subcommand(
      "get", "List runs, nodes, node events, the queue, teams, health results or a run's metrics");
  get->require_subcommand(1);

  auto runs = std::make_shared<GetRunsOptions>();
  CLI::App* get_runs = get->add_subcommand("runs", "List runs");
  get_runs->add_option("GLOB", runs->globs, "Run names or globs (\"train-*\")");
  get_runs
      ->add_option("--status", runs->statuses,
                   "Only runs in this status (repeat or separate with commas)")
      ->delimiter(',');
  get_runs->add_option("--user", runs->user, "Only this user's runs");
  get_runs->add_option("--cluster", runs->cluster, "Only runs on this cluster");
  get_runs->add_option("--gpu-type", runs->gpu_type, "Only runs asking for this GPU type");
  get_runs->add_option("--before", runs->before,
                       "Only runs created before: RFC 3339 time or an age (2h, 1d)");
  get_runs->add_option("--after", runs->after,
                       "Only runs created after: RFC 3339 time or an age (2h, 1d)");
  get_runs->add_option("--limit", runs->limit, "At most this many runs")
      ->check(CLI::Range(0, 1000000));
  get_runs->add_flag("--latest", runs->latest, "Only the most recently created matching run");
  get_runs
      ->add_option("-m,--metadata", runs->metadata,
                   "Only runs whose metadata has KEY=VALUE (repeatable: every pair must match)")
      ->type_name("KEY=VALUE");
  OnParsed(get_runs, slot, [runs](CommandContext& context) { return GetRuns(context, *runs); });

  auto nodes = std::make_shared<GetNodesOptions>();
  CLI::App* get_nodes = get->add_subcommand("nodes", "List nodes");
  get_nodes->add_option("NAME", nodes->names, "Only these nodes");
  get_nodes->add_option("--cluster", nodes->cluster, "Only nodes of this cluster");
  get_nodes->add_option("--gpu-type", nodes->gpu_type, "Only nodes with this GPU type");
  OnParsed(get_nodes, slot, [nodes](CommandContext& context) { return GetNodes(context, *nodes); });

  auto events = std::make_shared<GetEventsOptions>();
  CLI::App* get_events = get->add_subcommand("events", "List node events (cordons, faults, ...)");
  get_events->add_option("--node", events->nodes, "Only this node's events (repeatable)");
  get_events->add_option("--limit", events->limit, "At most this many events")
      ->check(CLI::Range(0, 1000000));
  get_events->add_flag("-f,--follow", events->follow,
                       "Keep printing new events as they happen (Ctrl-C to stop)");
  AddGetHealthCommands(get, slot);
  AddGetMetricsCommand(get, slot);
  AddGetTeamCommands(get, slot);
  OnParsed(get_events, slot,
           [events](CommandContext& context) { return GetEvents(context, *events); });
}

}  // namespace tessera::cli
