// mcli run -f FILE / mcli run submit -f FILE: parse the run YAML here, apply the overrides,
// submit, print the run's name and, with --follow, its status changes and logs until it ends.
// mcli run -r RUN starts an ended run again; mcli run --clone RUN submits a copy of one, with
// the overrides applied.

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>

#include "base/clock.h"
#include "cli/commands.h"
#include "cli/local_files.h"
#include "cli/names.h"
#include "cli/progress_ticker.h"
#include "cli/run_view.h"
#include "cli/spec_overrides.h"
#include "cli/stream_reconnect.h"
#include "tessera/v1/runs.grpc.pb.h"

namespace tessera::cli {
namespace {

using tessera::v1::RunService;

// How often a follower reads the run's progress, and how often at most a plain progress line
// is printed where there is no terminal (a log file need not fill with them).
constexpr absl::Duration kProgressPoll = absl::Seconds(2);
constexpr absl::Duration kPlainProgressEvery = absl::Seconds(30);

struct SubmitOptions {
  std::string file;
  std::string restart;  // -r/--restart RUN
  std::string clone;    // --clone RUN
  SpecOverrides overrides;
  std::string idempotency_key;
  bool follow = false;
};

void AddSubmitFlags(CLI::App* command, const std::shared_ptr<SubmitOptions>& options) {
  SubmitOptions* o = options.get();
  command->add_option("-f,--file", o->file, "Run YAML file")->type_name("FILE");
  command->add_option("-r,--restart", o->restart, "Start this ended run again")->type_name("RUN");
  command->add_option("--clone", o->clone, "Submit a copy of this run, with the overrides")
      ->type_name("RUN");
  AddOverrideFlags(command, &o->overrides);
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

// Where a watch stopped: the run as the server showed it last, and the status and attempt of
// the change that stopped it (an event's own, which may be older than the run's: a run that
// ended at once is read as ended while its first events are still being shown).
struct Watched {
  tessera::v1::Run run;
  tessera::v1::RunStatus status = tessera::v1::RUN_STATUS_UNSPECIFIED;
  int attempt = -1;
  // The change that showed the run ended, printed by the caller after the run's last lines.
  std::optional<tessera::v1::RunChange> final_change;
};

// The change as a person reads it: with the status its event led to.
tessera::v1::RunChange AsShown(const tessera::v1::RunChange& change,
                               tessera::v1::RunStatus status) {
  tessera::v1::RunChange shown = change;
  shown.mutable_run()->set_status(status);
  return shown;
}

// Watches the run, printing its status changes (its current state first, unless that is the
// status printed last), until `done(status, attempt)`. `last` is the status printed last, kept
// across calls. A change that ends the run is not printed but returned.
template <typename Done>
Watched WatchUntil(CommandContext& context, const std::string& name, tessera::v1::RunStatus& last,
                   Done&& done) {
  Connection& connection = context.connection();
  std::unique_ptr<RunService::Stub> stub = RunService::NewStub(connection.channel());
  tessera::v1::WatchRunsRequest request;
  request.mutable_filter()->add_name_globs(name);
  // A watch the server ends (its lifetime, a restart) is opened again, and the run read again:
  // the state it is in now, then every change after it.
  StreamReconnects reconnects(context.err(), "the watch of run " + name,
                              std::make_shared<SystemClock>());
  grpc::Status ended;
  do {
    const std::unique_ptr<grpc::ClientContext> stream_context = connection.StreamContext();
    std::unique_ptr<grpc::ClientReader<tessera::v1::RunChange>> reader =
        stub->WatchRuns(stream_context.get(), request);
    // The server sends its headers once the watch's start is fixed: the state read next is
    // followed by every change after it, and a run that moves on meanwhile is not missed.
    reader->WaitForInitialMetadata();
    const auto stop = [&](Watched w) {
      stream_context->TryCancel();
      reader->Finish();
      return w;
    };
    // Shows a change (if `show`, and unless it ends the run) and says whether the watch is
    // done.
    const auto reached = [&](const tessera::v1::RunChange& change, tessera::v1::RunStatus status,
                             int attempt, bool show = true) -> std::optional<Watched> {
      last = status;
      const tessera::v1::RunChange shown = AsShown(change, status);
      if (IsTerminal(status)) return Watched{change.run(), status, attempt, shown};
      if (show) PrintChange(context, shown);
      if (done(status, attempt)) return Watched{change.run(), status, attempt, std::nullopt};
      return std::nullopt;
    };

    tessera::v1::GetRunRequest get;
    get.set_name(name);
    tessera::v1::GetRunResponse current;
    connection.Unary([&](grpc::ClientContext* c) { return stub->GetRun(c, get, &current); });
    tessera::v1::RunChange change;
    *change.mutable_run() = current.run();
    // Its current state first, unless that is the status printed last.
    const tessera::v1::RunStatus now = current.run().status();
    if (auto w = reached(change, now, current.run().resumption_index(), now != last)) {
      return stop(*w);
    }
    while (reader->Read(&change)) {
      reconnects.Received();
      if (change.run().name() != name) continue;
      const bool has_event = change.has_event() && change.event().type() != 0;
      tessera::v1::RunStatus status = change.run().status();
      int attempt = change.run().resumption_index();
      if (has_event) {
        // The event's own status: the run read with it may be further on already.
        status = StatusAfterEvent(change.event().type()).value_or(last);
        attempt = change.event().resumption_index();
      } else if (status == last) {
        continue;
      }
      if (auto w = reached(change, status, attempt)) return stop(*w);
    }
    ended = reader->Finish();
  } while (reconnects.Again(ended));
  connection.Check(ended);
  ThrowFailure("the server ended the watch of run " + name + " before the run ended");
}

// Prints the logs of one attempt of the run: with `follow`, until the attempt ends. Logs that
// cannot be shown (a server without the log service) are a warning: the run is still followed.
int PrintAttemptLogs(CommandContext& context, const std::string& name, int attempt, bool follow,
                     bool by_node) {
  tessera::v1::GetLogsRequest request;
  request.set_run_name(name);
  request.set_resumption_index(attempt);
  request.set_follow(follow);
  try {
    return PrintLogStream(context, request, by_node);
  } catch (const CliError& e) {
    context.err() << "Warning: cannot show the logs of run " << name << ": " << e.what() << "\n";
    return kExitOk;
  }
}

// The run's progress, read from a list (which carries no command or parameters: read every 2 s
// by every follower); empty when the call fails (the ticker tries again).
ProgressTicker::Source ProgressOf(CommandContext& context, const std::string& name) {
  Connection& connection = context.connection();
  auto stub = std::shared_ptr<RunService::Stub>(RunService::NewStub(connection.channel()));
  return [&connection, stub, name]() -> std::optional<tessera::v1::RunProgress> {
    tessera::v1::ListRunsRequest request;
    request.mutable_filter()->add_name_globs(name);  // a run name has no glob characters
    request.mutable_filter()->set_limit(1);
    tessera::v1::ListRunsResponse response;
    const std::unique_ptr<grpc::ClientContext> call = connection.UnaryContext();
    // Short: the follow waits for this call when the attempt ends.
    call->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!stub->ListRuns(call.get(), request, &response).ok() || response.runs().empty()) {
      return std::nullopt;
    }
    return response.runs(0).progress();
  };
}

// Follows the logs of a running attempt until it ends, with the run's progress under them (a
// bar on a terminal, a line now and then elsewhere; none with -o json or yaml).
int FollowAttempt(CommandContext& context, const std::string& name, int attempt, bool by_node) {
  if (context.format() != OutputFormat::kTable) {
    return PrintAttemptLogs(context, name, attempt, /*follow=*/true, by_node);
  }
  StatusLine line(context.out(), context.terminal_width() > 0);
  context.set_status_line(&line);
  int result = kExitOk;
  {
    const ProgressTicker ticker(line, ProgressOf(context, name), context.terminal_width(),
                                kProgressPoll, kPlainProgressEvery);
    result = PrintAttemptLogs(context, name, attempt, /*follow=*/true, by_node);
  }
  context.set_status_line(nullptr);
  return result;
}

// The final line of a run that was already over when the watch read it: its status with the
// message of the event that ended it (the run's own reason is empty when it completed).
tessera::v1::RunChange WithEndingEvent(CommandContext& context, tessera::v1::RunChange change) {
  if (change.has_event()) return change;
  Connection& connection = context.connection();
  std::unique_ptr<RunService::Stub> stub = RunService::NewStub(connection.channel());
  tessera::v1::DescribeRunRequest request;
  request.set_name(change.run().name());
  tessera::v1::DescribeRunResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->DescribeRun(c, request, &response); });
  const auto& events = response.description().events();
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (StatusAfterEvent(it->type()) == change.run().status()) {
      *change.mutable_event() = *it;
      break;
    }
  }
  return change;
}

// Prints the run's status changes until it runs, then its logs until that attempt ends, and so
// on (a requeued run runs again as its next attempt) until the run ends; then the lines of any
// attempt that ran and ended before the follower saw it run (a run that ends at once), and the
// final status with its own message. Exit 0 when it completed.
int FollowRun(CommandContext& context, const std::string& name) {
  tessera::v1::RunStatus last = tessera::v1::RUN_STATUS_UNSPECIFIED;
  int followed_attempt = -1;  // the latest attempt whose logs were printed to their end
  for (;;) {
    const Watched w =
        WatchUntil(context, name, last, [&](tessera::v1::RunStatus status, int attempt) {
          return IsTerminal(status) ||
                 (status == tessera::v1::RUN_STATUS_RUNNING && attempt > followed_attempt);
        });
    if (IsTerminal(w.status)) {
      for (int a = followed_attempt + 1; a <= w.run.resumption_index(); ++a) {
        if (PrintAttemptLogs(context, name, a, /*follow=*/false, LaunchedPerNode(w.run)) ==
            kExitInterrupted) {
          return kExitInterrupted;
        }
      }
      if (w.final_change) PrintChange(context, WithEndingEvent(context, *w.final_change));
      return FinalStatus(w.run);
    }
    followed_attempt = w.attempt;
    if (FollowAttempt(context, name, w.attempt, LaunchedPerNode(w.run)) == kExitInterrupted)
      return kExitInterrupted;
  }
}

// One key per invocation: a call retried on UNAVAILABLE submits (or restarts) once.
std::string IdempotencyKey(const SubmitOptions& options) {
  return options.idempotency_key.empty() ? NewUuid() : options.idempotency_key;
}

// Calls a RunService method that takes a run's name and an idempotency key and answers with the
// run: mcli run -r RUN (RestartRun: started again with its own spec), mcli run --clone RUN
// without overrides (CloneRun: the server's copy, whose event names the original).
template <typename Request, typename Response>
tessera::v1::Run CallOnRun(CommandContext& context,
                           grpc::Status (RunService::Stub::*method)(grpc::ClientContext*,
                                                                    const Request&, Response*),
                           const std::string& name, const std::string& idempotency_key) {
  Request request;
  request.set_idempotency_key(idempotency_key);
  request.set_name(name);
  Connection& connection = context.connection();
  std::unique_ptr<RunService::Stub> stub = RunService::NewStub(connection.channel());
  Response response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return ((*stub).*method)(c, request, &response); });
  return response.run();
}

// The spec of run `name`, as it was submitted, for a clone with overrides.
tessera::v1::RunSpec SpecOfRun(CommandContext& context, const std::string& name) {
  tessera::v1::GetRunRequest request;
  request.set_name(name);
  Connection& connection = context.connection();
  std::unique_ptr<RunService::Stub> stub = RunService::NewStub(connection.channel());
  tessera::v1::GetRunResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->GetRun(c, request, &response); });
  return response.run().spec();
}

// Submits the file's spec, or a clone's, with the overrides applied.
tessera::v1::Run SubmitSpec(CommandContext& context, const SubmitOptions& options) {
  tessera::v1::SubmitRunRequest request;
  std::vector<std::string> notes;
  if (!options.clone.empty()) {
    *request.mutable_spec() = SpecOfRun(context, options.clone);
    // Kept as the run's event, not a warning: nothing was read otherwise than written.
    request.add_spec_notes("A clone of run " + options.clone +
                           ", with the command line's overrides");
  } else {
    *request.mutable_spec() = LoadRunSpecFile(options.file, &notes);
    // Before the overrides' check: the whole spec, files included, must be within its limit.
    PackLocalIntegrations(*request.mutable_spec());
  }
  ApplyOverrides(options.overrides, *request.mutable_spec(), &notes);
  for (const auto& note : notes) {
    context.err() << "Warning: " << note << "\n";
    request.add_spec_notes(note);
  }
  request.set_idempotency_key(IdempotencyKey(options));

  Connection& connection = context.connection();
  std::unique_ptr<RunService::Stub> stub = RunService::NewStub(connection.channel());
  tessera::v1::SubmitRunResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->SubmitRun(c, request, &response); });
  return response.run();
}

int Submit(CommandContext& context, const SubmitOptions& options) {
  const int sources = static_cast<int>(!options.file.empty()) +
                      static_cast<int>(!options.restart.empty()) +
                      static_cast<int>(!options.clone.empty());
  if (sources == 0) {
    ThrowUsage(
        "a run YAML file is required: mcli run -f FILE (or mcli run -r RUN to start an ended "
        "run again, mcli run --clone RUN to submit a copy)");
  }
  if (sources > 1) ThrowUsage("give one of -f FILE, -r/--restart RUN and --clone RUN");
  if (!options.restart.empty() && options.overrides.Any()) {
    ThrowUsage(
        "-r/--restart starts the run again as it was: to change it, submit a copy with "
        "--clone " +
        options.restart + " and the overrides");
  }
  tessera::v1::Run run;
  if (!options.restart.empty()) {
    run =
        CallOnRun(context, &RunService::Stub::RestartRun, options.restart, IdempotencyKey(options));
  } else if (!options.clone.empty() && !options.overrides.Any()) {
    run = CallOnRun(context, &RunService::Stub::CloneRun, options.clone, IdempotencyKey(options));
  } else {
    run = SubmitSpec(context, options);
  }

  if (context.format() == OutputFormat::kTable) {
    context.out() << run.name() << "\n";
  } else if (options.follow) {
    PrintStreamedDocument(context.out(), context.format(), MessageToJson(run));
  } else {
    PrintDocument(context.out(), context.format(), MessageToJson(run));
  }
  context.out().flush();
  if (options.follow) return FollowRun(context, run.name());
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
