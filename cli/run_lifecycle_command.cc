// mcli stop|delete|update|restart|clone run, mcli watchdog RUN: change runs that exist.

#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/names.h"
#include "tessera/v1/runs.grpc.pb.h"

namespace tessera::cli {
namespace {

using tessera::v1::RunService;

// Whether a failed call concerns only the run it names, so that the others are still tried.
bool IsPerRunError(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::PERMISSION_DENIED:
      return true;
    default:
      return false;
  }
}

// Calls `call(name, context)` for every name. A per-run failure is printed and the next name
// tried; any other failure (server down, bad key) ends the command. Returns 1 if any failed.
template <typename Call>
int ForEachRun(CommandContext& context, const std::vector<std::string>& names, Call&& call) {
  Connection& connection = context.connection();
  int exit_code = kExitOk;
  for (const std::string& name : names) {
    const std::unique_ptr<grpc::ClientContext> call_context = connection.UnaryContext();
    const grpc::Status status = call(name, call_context.get());
    if (!status.ok() && IsPerRunError(status)) {
      context.err() << "Error: " << name << ": "
                    << DescribeRpcError(status, connection.endpoint(),
                                        !context.settings().api_key.value.empty())
                    << "\n";
      exit_code = kExitFailure;
      continue;
    }
    connection.Check(status);
  }
  return exit_code;
}

struct StopOptions {
  std::vector<std::string> names;
  std::string reason;
};

int StopRuns(CommandContext& context, const StopOptions& options) {
  auto stub = RunService::NewStub(context.connection().channel());
  Json stopped = Json::array();
  const int exit_code =
      ForEachRun(context, options.names, [&](const std::string& name, grpc::ClientContext* c) {
        tessera::v1::StopRunRequest request;
        request.set_idempotency_key(NewUuid());
        request.set_name(name);
        request.set_reason(options.reason);
        tessera::v1::StopRunResponse response;
        grpc::Status status = stub->StopRun(c, request, &response);
        if (status.ok()) {
          stopped.push_back(MessageToJson(response.run()));
          if (context.format() == OutputFormat::kTable) {
            context.out() << "Stopping run " << response.run().name() << " ("
                          << ShortName(response.run().status()) << ")\n";
          }
        }
        return status;
      });
  PrintIfStructured(context, stopped);
  return exit_code;
}

struct DeleteOptions {
  std::vector<std::string> names;
  bool yes = false;  // accepted for compatibility: delete never asks
};

int DeleteRuns(CommandContext& context, const DeleteOptions& options) {
  auto stub = RunService::NewStub(context.connection().channel());
  Json deleted = Json::array();
  const int exit_code =
      ForEachRun(context, options.names, [&](const std::string& name, grpc::ClientContext* c) {
        tessera::v1::DeleteRunRequest request;
        request.set_idempotency_key(NewUuid());
        request.set_name(name);
        tessera::v1::DeleteRunResponse response;
        grpc::Status status = stub->DeleteRun(c, request, &response);
        if (status.ok()) {
          deleted.push_back(name);
          if (context.format() == OutputFormat::kTable) {
            context.out() << "Deleted run " << name << "\n";
          }
        }
        return status;
      });
  PrintIfStructured(context, deleted);
  return exit_code;
}

// Prints the run a command returned: its name and status, or the document with -o.
void PrintRunResult(CommandContext& context, const std::string& verb, const tessera::v1::Run& run) {
  if (PrintIfStructured(context, MessageToJson(run))) return;
  context.out() << verb << " run " << run.name() << " (" << ShortName(run.status()) << ")\n";
}

struct UpdateOptions {
  std::string name;
  std::optional<double> max_duration_hours;
  std::optional<std::string> priority;
  std::optional<std::string> preemptible;
  std::optional<int> max_retries;
};

int UpdateRun(CommandContext& context, const UpdateOptions& options) {
  tessera::v1::UpdateRunRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_name(options.name);
  if (options.max_duration_hours) {
    if (*options.max_duration_hours < 0) ThrowUsage("--max-duration must be 0 or more hours");
    request.set_max_duration_hours(*options.max_duration_hours);
  }
  if (options.priority) request.set_priority(ParsePriority("--priority", *options.priority));
  if (options.preemptible) request.set_preemptible(*options.preemptible == "true");
  if (options.max_retries) {
    if (*options.max_retries < 0) ThrowUsage("--max-retries must be 0 or more");
    request.set_max_retries(*options.max_retries);
  }
  if (!options.max_duration_hours && !options.priority && !options.preemptible &&
      !options.max_retries) {
    ThrowUsage(
        "nothing to update: give --max-duration, --priority, --preemptible or --max-retries");
  }
  Connection& connection = context.connection();
  auto stub = RunService::NewStub(connection.channel());
  tessera::v1::UpdateRunResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->UpdateRun(c, request, &response); });
  PrintRunResult(context, "Updated", response.run());
  return kExitOk;
}

int RestartRun(CommandContext& context, const std::string& name) {
  tessera::v1::RestartRunRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_name(name);
  Connection& connection = context.connection();
  auto stub = RunService::NewStub(connection.channel());
  tessera::v1::RestartRunResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->RestartRun(c, request, &response); });
  PrintRunResult(context, "Restarted", response.run());
  return kExitOk;
}

struct WatchdogOptions {
  std::string name;
  bool disable = false;
  std::optional<int> max_retries;
};

// mcli watchdog RUN [--disable] [--max-retries N]: whether the run is retried after a system
// failure (a node lost, a GPU fault), as mcli's watchdog.
int Watchdog(CommandContext& context, const WatchdogOptions& options) {
  if (options.disable && options.max_retries) {
    ThrowUsage("--max-retries is for a watchdog turned on, not with --disable");
  }
  if (options.max_retries && *options.max_retries < 0)
    ThrowUsage("--max-retries must be 0 or more");
  tessera::v1::UpdateRunRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_name(options.name);
  request.set_retry_on_system_failure(!options.disable);
  if (options.max_retries) request.set_max_retries(*options.max_retries);
  Connection& connection = context.connection();
  auto stub = RunService::NewStub(connection.channel());
  tessera::v1::UpdateRunResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->UpdateRun(c, request, &response); });
  if (PrintIfStructured(context, MessageToJson(response.run()))) return kExitOk;
  const auto& scheduling = response.run().spec().scheduling();
  if (options.disable) {
    context.out() << "Watchdog off for run " << response.run().name()
                  << ": it is not retried after a system failure\n";
  } else {
    context.out() << "Watchdog on for run " << response.run().name() << ": retried up to "
                  << (scheduling.has_max_retries() ? scheduling.max_retries() : 10)
                  << " times after a system failure\n";
  }
  return kExitOk;
}

struct CloneOptions {
  std::string name;
  std::string new_name;
};

int CloneRun(CommandContext& context, const CloneOptions& options) {
  tessera::v1::CloneRunRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_name(options.name);
  request.set_new_name(options.new_name);
  Connection& connection = context.connection();
  auto stub = RunService::NewStub(connection.channel());
  tessera::v1::CloneRunResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->CloneRun(c, request, &response); });
  if (!PrintIfStructured(context, MessageToJson(response.run()))) {
    context.out() << response.run().name() << "\n";
  }
  return kExitOk;
}

// Adds `verb` with its `run` subcommand; returns the latter.
CLI::App* AddVerb(CLI::App& app, const std::string& verb, const std::string& description) {
  CLI::App* command = app.add_subcommand(verb, description);
  command->require_subcommand(1);
  return command->add_subcommand("run", description);
}

}  // namespace

void AddRunLifecycleCommands(CLI::App& app, ActionSlot& slot) {
  auto stop = std::make_shared<StopOptions>();
  CLI::App* stop_run = AddVerb(app, "stop", "Stop runs");
  stop_run->add_option("NAME", stop->names, "Run names")->required();
  stop_run->add_option("--reason", stop->reason, "Why (kept in the run's events)");
  OnParsed(stop_run, slot, [stop](CommandContext& context) { return StopRuns(context, *stop); });

  auto remove = std::make_shared<DeleteOptions>();
  CLI::App* delete_run = AddVerb(app, "delete", "Delete runs");
  delete_run->add_option("NAME", remove->names, "Run names")->required();
  delete_run->add_flag("-y,--yes", remove->yes, "Accepted for compatibility (never asks)");
  OnParsed(delete_run, slot,
           [remove](CommandContext& context) { return DeleteRuns(context, *remove); });

  auto update = std::make_shared<UpdateOptions>();
  CLI::App* update_run = AddVerb(app, "update", "Change a run's scheduling");
  UpdateOptions* u = update.get();
  update_run->add_option("NAME", u->name, "Run name")->required();
  update_run->add_option_function<double>(
      "--max-duration", [u](const double& hours) { u->max_duration_hours = hours; },
      "Maximum duration in hours (0: unlimited)");
  update_run->add_option_function<std::string>(
      "--priority", [u](const std::string& priority) { u->priority = priority; },
      "lowest, low, medium, high or auto");
  update_run
      ->add_option_function<std::string>(
          "--preemptible", [u](const std::string& value) { u->preemptible = value; },
          "true or false")
      ->check(CLI::IsMember({"true", "false"}));
  update_run->add_option_function<int>(
      "--max-retries,--max_retries", [u](const int& retries) { u->max_retries = retries; },
      "Retries after system failures (mcli watchdog turns them on and off)");
  OnParsed(update_run, slot,
           [update](CommandContext& context) { return UpdateRun(context, *update); });

  auto restart = std::make_shared<std::string>();
  CLI::App* restart_run = AddVerb(app, "restart", "Start a stopped or failed run again");
  restart_run->add_option("NAME", *restart, "Run name")->required();
  OnParsed(restart_run, slot,
           [restart](CommandContext& context) { return RestartRun(context, *restart); });

  auto watchdog = std::make_shared<WatchdogOptions>();
  CLI::App* watchdog_command = app.add_subcommand(
      "watchdog", "Retry a run after system failures (node lost, GPU fault), or stop doing so");
  watchdog_command->add_option("RUN", watchdog->name, "Run name")->required();
  watchdog_command->add_flag("--disable", watchdog->disable, "Turn the watchdog off");
  WatchdogOptions* w = watchdog.get();
  watchdog_command->add_option_function<int>(
      "--max-retries,--max_retries", [w](const int& retries) { w->max_retries = retries; },
      "How many retries (default: the run's max_retries, or 10)");
  OnParsed(watchdog_command, slot,
           [watchdog](CommandContext& context) { return Watchdog(context, *watchdog); });

  auto clone = std::make_shared<CloneOptions>();
  CLI::App* clone_run = AddVerb(app, "clone", "Submit a copy of a run");
  clone_run->add_option("NAME", clone->name, "Run name")->required();
  clone_run->add_option("--name", clone->new_name, "Name of the copy");
  OnParsed(clone_run, slot, [clone](CommandContext& context) { return CloneRun(context, *clone); });
}

}  // namespace tessera::cli
