// mcli logs RUN: a run's output from the log service, as the ranks printed it; -f follows it
// live until the attempt ends or the user presses Ctrl-C.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "base/timestamps.h"
#include "base/utf8.h"
#include "cli/commands.h"
#include "cli/stream_reconnect.h"
#include "cli/time_format.h"
#include "proto/policy/log_cursor.h"
#include "proto/policy/packed_log_lines.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"

namespace tessera::cli {
namespace {

struct LogsOptions {
  std::string run;
  bool follow = false;
  std::optional<int> rank;
  std::optional<int> global_gpu_rank;  // mcli's name for --rank
  std::optional<int> local_gpu_rank;   // of --node-rank's node (0 when not given)
  std::optional<int> node_rank;
  std::optional<int> resumption;
  bool previous = false;
  bool failed = false;
  int tail = 0;
  bool first_exception = false;
  std::string since, until, grep;
};

tessera::v1::GetLogsRequest RequestFrom(const LogsOptions& options) {
  if (options.previous && options.resumption.has_value()) {
    ThrowUsage("--prev and --resumption both choose the attempt; give one of them");
  }
  if (options.rank && options.global_gpu_rank && *options.rank != *options.global_gpu_rank) {
    ThrowUsage("--rank and --global-gpu-rank name the same rank; give one of them");
  }
  if (options.local_gpu_rank && (options.rank || options.global_gpu_rank)) {
    ThrowUsage("--local-gpu-rank (with --node-rank) and --rank choose the rank; give one of them");
  }
  tessera::v1::GetLogsRequest request;
  request.set_run_name(options.run);
  if (options.rank) request.set_rank(*options.rank);
  if (options.global_gpu_rank) request.set_rank(*options.global_gpu_rank);
  if (options.node_rank) request.set_node_rank(*options.node_rank);
  if (options.resumption) request.set_resumption_index(*options.resumption);
  request.set_previous(options.previous);
  request.set_failed(options.failed);
  request.set_tail(options.tail);
  request.set_follow(options.follow);
  request.set_first_exception(options.first_exception);
  const absl::Time now = absl::Now();
  if (!options.since.empty()) {
    *request.mutable_since() = ToProtoTime(ParseTimeArg("--since", options.since, now));
  }
  if (!options.until.empty()) {
    *request.mutable_until() = ToProtoTime(ParseTimeArg("--until", options.until, now));
  }
  request.set_grep(options.grep);
  return request;
}

// Whether the request asks for one rank's output, so that lines need no "[rank N] " prefix.
bool OneRank(const tessera::v1::GetLogsRequest& request) {
  return request.has_rank() || request.failed() || request.first_exception();
}

// A log line as JSON: protobuf's mapping, except that `text` is a string (invalid UTF-8 bytes
// replaced by U+FFFD); the exact bytes are in `text_base64` when the text was not valid UTF-8.
Json LogLineJson(const tessera::v1::LogLine& line) {
  Json json = MessageToJson(line);
  if (!IsValidUtf8(line.text())) json["text_base64"] = json["text"];
  json["text"] = ToValidUtf8(line.text());
  return json;
}

void PrintLine(CommandContext& context, const tessera::v1::LogLine& line, bool prefix,
               bool by_node) {
  if (context.format() != OutputFormat::kTable) {
    PrintStreamedDocument(context.out(), context.format(), LogLineJson(line));
    return;
  }
  std::ostream& out = context.out();
  if (prefix && by_node) out << "[node " << line.node_rank() << "] ";
  if (prefix && !by_node) out << "[rank " << line.rank() << "] ";
  out.write(line.text().data(), static_cast<std::streamsize>(line.text().size()));
  out << '\n';
}

// While it lives, Ctrl-C (SIGINT) cancels `call` instead of killing mcli, so that a stream ends
// cleanly: everything received is printed and the command returns kExitInterrupted. The signal
// handler only writes to a pipe; a thread turns that into TryCancel, which is not safe to call
// from a handler.
class CancelOnInterrupt {
 public:
  explicit CancelOnInterrupt(grpc::ClientContext* call) {
    if (::pipe2(pipe_, O_CLOEXEC) != 0) return;  // no pipe: Ctrl-C keeps its default
    write_fd_.store(pipe_[1]);
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previous_);
    watcher_ = std::thread([this, call] {
      char c = 0;
      while (::read(pipe_[0], &c, 1) == 1 && c == 'i') {
        interrupted_.store(true);
        call->TryCancel();
      }
    });
  }

  ~CancelOnInterrupt() {
    if (!watcher_.joinable()) return;
    ::sigaction(SIGINT, &previous_, nullptr);
    write_fd_.store(-1);
    [[maybe_unused]] const ssize_t n = ::write(pipe_[1], "q", 1);
    watcher_.join();
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }

  CancelOnInterrupt(const CancelOnInterrupt&) = delete;
  CancelOnInterrupt& operator=(const CancelOnInterrupt&) = delete;

  bool interrupted() const { return interrupted_.load(); }

 private:
  static void OnSignal(int) {
    const int fd = write_fd_.load();
    if (fd >= 0) {
      [[maybe_unused]] const ssize_t n = ::write(fd, "i", 1);
    }
  }

  static inline std::atomic<int> write_fd_{-1};
  int pipe_[2] = {-1, -1};
  struct sigaction previous_ = {};
  std::thread watcher_;
  std::atomic<bool> interrupted_{false};
};

// A whole number of at least `min`; the error names what was given.
CLI::Validator AtLeast(int min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int value = 0;
        if (CLI::detail::lexical_cast(text, value) && value >= min) return {};
        return "expected a whole number of at least " + std::to_string(min) + ", got \"" + text +
               "\"";
      },
      ">=" + std::to_string(min));
}

// The global rank of --local-gpu-rank on --node-rank's node (0 when not given), as the run is
// placed now: the ranks of the nodes before it, and then its own, in node-rank order.
int GlobalRankOf(const tessera::v1::GetRunResponse& got, const LogsOptions& options) {
  const int node_rank = options.node_rank.value_or(0);
  const int local = *options.local_gpu_rank;
  int before = 0;
  std::optional<int> on_node;
  for (const auto& node : got.run().nodes()) {
    if (node.node_rank() < node_rank) before += node.gpu_indices_size();
    if (node.node_rank() == node_rank) on_node = node.gpu_indices_size();
  }
  if (!on_node) {
    ThrowFailure(absl::StrCat("--local-gpu-rank: run ", options.run, " has no node rank ",
                              node_rank,
                              got.run().nodes().empty() ? " (it is not placed yet)" : ""));
  }
  if (local >= *on_node) {
    ThrowUsage(absl::StrCat("--local-gpu-rank ", local, ": node rank ", node_rank, " of ",
                            options.run, " has ", *on_node, " GPU(s), local ranks 0 to ",
                            *on_node - 1));
  }
  return before + local;
}

int Logs(CommandContext& context, const LogsOptions& options) {
  tessera::v1::GetLogsRequest request = RequestFrom(options);
  // The run: where its local ranks are (needed), and whether its lines are its nodes'
  // launchers' (only for the prefix: where it cannot be read, the log service says why).
  auto stub = tessera::v1::RunService::NewStub(context.connection().channel());
  tessera::v1::GetRunRequest get;
  get.set_name(options.run);
  tessera::v1::GetRunResponse got;
  if (options.local_gpu_rank) {
    context.connection().Unary([&](grpc::ClientContext* c) { return stub->GetRun(c, get, &got); });
    request.set_rank(GlobalRankOf(got, options));
  } else if (!OneRank(request)) {
    const std::unique_ptr<grpc::ClientContext> call = context.connection().UnaryContext();
    if (!stub->GetRun(call.get(), get, &got).ok()) got.Clear();
  }
  return PrintLogStream(context, request, got.has_run() && LaunchedPerNode(got.run()));
}

}  // namespace

// Reads one call's stream to its end, handing each message to `each`.
template <typename Reader, typename Message, typename Each>
grpc::Status Drain(Reader& reader, Message& message, const Each& each) {
  while (reader.Read(&message)) each(message);
  return reader.Finish();
}

bool LaunchedPerNode(const tessera::v1::Run& run) {
  // A run's command runs once per node unless it says `launch: rank` (what StartCommand sends).
  return run.spec().launch() != tessera::v1::LAUNCH_MODE_RANK;
}

// The request that goes on after what `received` holds: the same lines, from the cursor (the
// attempt the first request chose; no tail, which was shown).
tessera::v1::GetLogsRequest ResumeAfter(const tessera::v1::GetLogsRequest& request,
                                        const LogCursorKeeper& received) {
  if (received.empty()) return request;
  tessera::v1::GetLogsRequest next = request;
  next.clear_tail();
  next.clear_previous();
  next.clear_resumption_index();
  *next.mutable_resume() = received.Cursor();
  return next;
}

int PrintLogStream(CommandContext& context, const tessera::v1::GetLogsRequest& request,
                   bool by_node) {
  Connection& connection = context.connection();
  std::unique_ptr<tessera::v1::LogService::Stub> stub =
      tessera::v1::LogService::NewStub(connection.channel());
  const bool prefix = !OneRank(request);
  int64_t printed = 0;
  // What was received, to go on from after the service ends the stream (its lifetime, a
  // restart, a dropped connection): no line twice, none lost.
  LogCursorKeeper received;
  StreamReconnects reconnects(context.err(), "the logs of run " + request.run_name(),
                              std::make_shared<SystemClock>());
  const auto print = [&](const tessera::v1::LogLine& line) {
    PrintLine(context, line, prefix, by_node);
    ++printed;
    received.Received(line);
  };
  grpc::Status status;
  bool interrupted = false;
  do {
    // StreamLogs: the lines in batches. No deadline even without follow: a long log may take
    // longer than a unary call's 30 s.
    const std::unique_ptr<grpc::ClientContext> call = connection.StreamContext();
    const CancelOnInterrupt interrupt(call.get());
    // Packed: a line costs the service and mcli a copy of its bytes, not a message (a log
    // service from before packing sends `lines`, which LinesInDisplayOrder takes too).
    tessera::v1::GetLogsRequest packed = ResumeAfter(request, received);
    packed.set_packed(true);
    auto reader = stub->StreamLogs(call.get(), packed);
    tessera::v1::LogLines batch;
    absl::Status malformed;
    status = Drain(*reader, batch, [&](const tessera::v1::LogLines& b) {
      reconnects.Received();
      if (b.has_start()) received.Started(b.start());
      auto lines = tessera::LinesInDisplayOrder(b);
      if (!lines.ok()) {
        // Bytes that are not whole lines: said once, and the follow ends (nothing after them
        // could be trusted to be in order).
        if (malformed.ok()) malformed = lines.status();
        call->TryCancel();
        return;
      }
      const StatusLine::Hold hold(context.status_line());  // the lines go above a progress bar
      for (const auto& line : *lines) print(line);
      if (request.follow()) context.out().flush();
    });
    if (!malformed.ok()) {
      status = grpc::Status(
          grpc::StatusCode::DATA_LOSS,
          absl::StrCat("the log service sent malformed packed lines: ", malformed.message()));
    }
    interrupted = interrupt.interrupted();
  } while (!interrupted && reconnects.Again(status));
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED && printed == 0 && !interrupted) {
    // A log service from before StreamLogs: the same lines, one message each.
    const std::unique_ptr<grpc::ClientContext> old_call = connection.StreamContext();
    const CancelOnInterrupt interrupt(old_call.get());
    auto reader = stub->GetLogs(old_call.get(), request);
    tessera::v1::LogLine line;
    status = Drain(*reader, line, [&](const tessera::v1::LogLine& l) {
      const StatusLine::Hold hold(context.status_line());
      print(l);
      if (request.follow()) context.out().flush();
    });
    interrupted = interrupt.interrupted();
  }
  context.out().flush();
  if (interrupted) return kExitInterrupted;
  connection.Check(status);
  return kExitOk;
}

void AddLogsCommands(CLI::App& app, ActionSlot& slot) {
  auto options = std::make_shared<LogsOptions>();
  LogsOptions* o = options.get();
  CLI::App* logs = app.add_subcommand(
      "logs", "Print a run's output (the latest attempt, every rank, ordered by time)");
  logs->add_option("RUN", o->run, "Run name (the full name, as mcli get runs shows it)")
      ->required();
  logs->add_flag("-f,--follow", o->follow,
                 "Keep printing new lines until the attempt ends (Ctrl-C to stop)");
  logs->add_option_function<int>(
          "--rank", [o](const int& rank) { o->rank = rank; }, "Only this rank's output")
      ->check(AtLeast(0));
  logs->add_option_function<int>(
          "--global-gpu-rank", [o](const int& rank) { o->global_gpu_rank = rank; },
          "Only this rank's output (mcli's name for --rank)")
      ->check(AtLeast(0));
  logs->add_option_function<int>(
          "--local-gpu-rank", [o](const int& rank) { o->local_gpu_rank = rank; },
          "Only the output of this local rank of --node-rank's node (node rank 0 when not "
          "given), as the run is placed now")
      ->check(AtLeast(0));
  logs->add_option_function<int>(
          "--node-rank", [o](const int& node_rank) { o->node_rank = node_rank; },
          "Only the output of the ranks on this node (by node rank)")
      ->check(AtLeast(0));
  logs->add_option_function<int>(
          "--resumption", [o](const int& index) { o->resumption = index; },
          "This attempt (resumption index 0, 1, ...) instead of the latest")
      ->check(AtLeast(0));
  logs->add_flag("--prev", o->previous, "The attempt before the latest");
  logs->add_flag("--failed", o->failed,
                 "Only the first failed rank's output (the default for a failed run)");
  logs->add_option("--tail", o->tail, "Only the last N lines")->check(AtLeast(1));
  logs->add_flag("--first-exception", o->first_exception,
                 "Only the first exception (Python traceback, C++ terminate) and its context");
  logs->add_option("--since", o->since,
                   "Only lines printed since then: an age (30m, 2h, 1d) or a time (RFC 3339, "
                   "2024-05-01T12:00:00Z)");
  logs->add_option("--until", o->until, "Only lines printed before then (as --since)");
  logs->add_option("--grep", o->grep,
                   "Only lines matching this regular expression (RE2 syntax; a word matches the "
                   "lines that contain it), matched by the log service");
  OnParsed(logs, slot, [options](CommandContext& context) { return Logs(context, *options); });
}

}  // namespace tessera::cli
