// mcli run -f FILE / mcli run submit -f FILE: parse the run YAML here, apply the overrides,
// submit, print the run's name and, with --follow, its status changes and logs until it ends.

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/names.h"
#include "cli/run_view.h"
#include "cli/local_files.h"
#include "cli/spec_overrides.h"
#include "tessera/v1/runs.grpc.pb.h"

namespace tessera::cli {
namespace {

using tessera::v1::RunService;

struct SubmitOptions {
  std::string file;
  SpecOverrides overrides;
  std::string idempotency_key;
  bool follow = false;
};

void AddSubmitFlags(CLI::App* command, const std::shared_ptr<SubmitOptions>& options) {
  SubmitOptions* o = options.get();
  command->add_option("-f,--file", o->file, "Run YAML file")->type_name("FILE");
  command->add_option_function<int>(
      "--gpus", [o](const int& gpus) { o->overrides.gpus = gpus; }, "Override compute.gpus");
  command->add_option_function<std::string>(
      "--cluster", [o](const std::string& cluster) { o->overrides.cluster = cluster; },
      "Override compute.cluster");
  command->add_option_function<std::string>(
      "--priority", [o](const std::string& priority) { o->overrides.priority = priority; },
      "Override scheduling.priority (lowest, low, medium, high, auto)");
  command->add_option_function<std::string>(
      "--name", [o](const std::string& name) { o->overrides.name = name; }, "Override name");
  command->add_option("--idempotency-key", o->idempotency_key,
                      "Key that makes a repeated submit create one run (default: random)");
  command->add_flag("--follow", o->follow,
                    "Print the run's status changes and its logs until it ends (exit 0 if it "
                    "completed)");
}

// The exit code for a run that ended: 0 when it completed; otherwise an error naming its status.
int FinalStatus(const tessera::v1::Run& run) {
  if (run.status() == tessera::v1::RUN_STATUS_COMPLETED) return kExitOk;
  std::string message = "run " + run.name() + " ended " + ShortName(run.status());
  if (!run.status_reason().empty()) message += ": " + run.status_reason();
  ThrowFailure(message);
}

void PrintChange(CommandContext& context, const tessera::v1::RunChange& change) {
  if (context.format() == OutputFormat::kTable) {
    context.out() << FormatRunChange(change) << "\n";
    context.out().flush();
  } else {
    PrintStreamedDocument(context.out(), context.format(), MessageToJson(change));
  }
}

// Watches the run, printing its status changes (its current state first, unless that is the
// status printed last), until `done(run)`; returns the run as it was then. `last` is the status
// printed last, kept across calls.
template <typename Done>
tessera::v1::Run WatchUntil(CommandContext& context, const std::string& name,
                            tessera::v1::RunStatus& last, Done&& done) {
  Connection& connection = context.connection();
  std::unique_ptr<RunService::Stub> stub = RunService::NewStub(connection.channel());
  tessera::v1::WatchRunsRequest request;
  request.mutable_filter()->add_name_globs(name);
  const std::unique_ptr<grpc::ClientContext> stream_context = connection.StreamContext();
  std::unique_ptr<grpc::ClientReader<tessera::v1::RunChange>> reader =
      stub->WatchRuns(stream_context.get(), request);
  const auto stop = [&](const tessera::v1::Run& run) {
    stream_context->TryCancel();
    reader->Finish();
    return run;
  };

  // The run may have moved (or ended) before the watch began: start from its current state.
  tessera::v1::GetRunRequest get;
  get.set_name(name);
  tessera::v1::GetRunResponse current;
  connection.Unary([&](grpc::ClientContext* c) { return stub->GetRun(c, get, &current); });
  tessera::v1::RunChange change;
  *change.mutable_run() = current.run();
  if (current.run().status() != last) PrintChange(context, change);
  last = current.run().status();
  if (done(current.run())) return stop(current.run());
  while (reader->Read(&change)) {
    if (change.run().name() != name) continue;
    const bool has_event = change.has_event() && change.event().type() != 0;
    if (change.run().status() == last && !has_event) continue;
    last = change.run().status();
    PrintChange(context, change);
    if (done(change.run())) return stop(change.run());
  }
  connection.Check(reader->Finish());
  ThrowFailure("the server ended the watch of run " + name + " before the run ended");
}

// Follows the logs of the run's current attempt until the attempt ends. Logs that cannot be
// shown (a server without the log service) are a warning: the run is still followed.
int FollowAttemptLogs(CommandContext& context, const tessera::v1::Run& run) {
  tessera::v1::GetLogsRequest request;
  request.set_run_name(run.name());
  request.set_resumption_index(run.resumption_index());
  request.set_follow(true);
  try {
    return PrintLogStream(context, request);
  } catch (const CliError& e) {
    context.err() << "Warning: cannot show the logs of run " << run.name() << ": " << e.what()
                  << "\n";
    return kExitOk;
  }
}

// Prints the run's status changes until it runs, then its logs until that attempt ends, and so
// on (a requeued run runs again as its next attempt) until the run ends; exit 0 when it
// completed.
int FollowRun(CommandContext& context, const std::string& name) {
  tessera::v1::RunStatus last = tessera::v1::RUN_STATUS_UNSPECIFIED;
  int followed_attempt = -1;  // the latest attempt whose logs were printed to their end
  for (;;) {
    const tessera::v1::Run run = WatchUntil(context, name, last, [&](const tessera::v1::Run& r) {
      return IsTerminal(r.status()) || (r.status() == tessera::v1::RUN_STATUS_RUNNING &&
                                        r.resumption_index() > followed_attempt);
    });
    if (IsTerminal(run.status())) return FinalStatus(run);
    followed_attempt = run.resumption_index();
    if (FollowAttemptLogs(context, run) == kExitInterrupted) return kExitInterrupted;
  }
}

int Submit(CommandContext& context, const SubmitOptions& options) {
  if (options.file.empty()) {
    ThrowUsage("a run YAML file is required: mcli run submit -f FILE");
  }
  tessera::v1::SubmitRunRequest request;
  std::vector<std::string> notes;
  *request.mutable_spec() = LoadRunSpecFile(options.file, &notes);
  // Before the overrides' check: the whole spec, files included, must be within its limit.
  PackLocalIntegrations(*request.mutable_spec());
  ApplyOverrides(options.overrides, *request.mutable_spec(), &notes);
  for (const auto& note : notes) {
    context.err() << "Warning: " << note << "\n";
    request.add_spec_notes(note);
  }
  // One key per invocation: a call retried on UNAVAILABLE submits once.
  request.set_idempotency_key(options.idempotency_key.empty() ? NewUuid()
                                                              : options.idempotency_key);

  Connection& connection = context.connection();
  std::unique_ptr<RunService::Stub> stub = RunService::NewStub(connection.channel());
  tessera::v1::SubmitRunResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->SubmitRun(c, request, &response); });

  if (context.format() == OutputFormat::kTable) {
    context.out() << response.run().name() << "\n";
  } else if (options.follow) {
    PrintStreamedDocument(context.out(), context.format(), MessageToJson(response.run()));
  } else {
    PrintDocument(context.out(), context.format(), MessageToJson(response.run()));
  }
  context.out().flush();
  if (options.follow) return FollowRun(context, response.run().name());
  return kExitOk;
}

}  // namespace

void AddRunCommands(CLI::App& app, ActionSlot& slot) {
  auto options = std::make_shared<SubmitOptions>();
  CLI::App* run = app.add_subcommand("run", "Submit a run: mcli run -f FILE (or mcli run submit)");
  run->require_subcommand(0, 1);
  AddSubmitFlags(run, options);
  CLI::App* submit = run->add_subcommand("submit", "Submit a run from a run YAML file");
  AddSubmitFlags(submit, options);
  const Action action = [options](CommandContext& context) { return Submit(context, *options); };
  OnParsed(run, slot, action);
  OnParsed(submit, slot, action);
}

}  // namespace tessera::cli
