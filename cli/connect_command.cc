// mcli connect RUN: a shell (a real terminal: keys as typed, Ctrl-C to the remote program,
// resizes) inside the run's container on one of its nodes, through the control plane
// (shell.proto; no SSH to nodes). mcli exits with the shell's exit code; the run goes on.
// mcli interactive: a run whose command waits, and a shell in it once it runs, as mcli's.

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cli/commands.h"
#include "cli/names.h"
#include "proto/policy/run_status.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/shell.grpc.pb.h"

namespace tessera::cli {
namespace {

namespace v1 = tessera::v1;

struct ConnectOptions {
  std::string run;
  int node_rank = 0;
  std::string command;
};

// The terminal in raw mode while it lives: every key goes to the remote shell as typed.
class RawTerminal {
 public:
  RawTerminal() {
    if (::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

// SIGWINCH, as a byte on a pipe that a thread reads.
int g_resized[2] = {-1, -1};
void OnResize(int) {
  const char byte = 1;
  ssize_t unused = ::write(g_resized[1], &byte, 1);
  (void)unused;
}

// What the threads that send share with the call; kept alive by each of them (a thread blocked
// reading the keyboard is left behind when the shell ends).
struct Call {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<v1::ShellService::Stub> stub;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ShellInput, v1::ShellOutput>> stream;
  absl::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;  // WritesDone was sent: nothing more may be

  bool Send(const v1::ShellInput& in) {
    absl::MutexLock lock(&mu);
    return !closed && stream->Write(in);
  }
  void Close() {
    absl::MutexLock lock(&mu);
    if (!closed) stream->WritesDone();
    closed = true;
  }
};

std::optional<std::pair<int, int>> TerminalSize() {
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0 || size.ws_row == 0) return std::nullopt;
  return std::make_pair(static_cast<int>(size.ws_row), static_cast<int>(size.ws_col));
}

int Connect(CommandContext& context, const ConnectOptions& o) {
  Connection& connection = context.connection();
  auto call = std::make_shared<Call>();
  call->context = connection.StreamContext();
  call->stub = v1::ShellService::NewStub(connection.channel());
  call->stream = call->stub->Connect(call->context.get());
  const bool tty = ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
  v1::ShellInput first;
  v1::ShellOpen* open = first.mutable_open();
  open->set_run_name(o.run);
  open->set_node_rank(o.node_rank);
  open->set_command(o.command);
  open->set_tty(tty);
  if (const auto size = tty ? TerminalSize() : std::nullopt) {
    open->set_rows(size->first);
    open->set_cols(size->second);
  }
  if (const char* term = std::getenv("TERM"); term != nullptr && tty) open->set_term(term);
  call->Send(first);

  std::optional<RawTerminal> raw;
  if (tty) {
    raw.emplace();
    if (::pipe2(g_resized, O_CLOEXEC) == 0) {
      ::signal(SIGWINCH, OnResize);
      std::thread([call] {
        char byte;
        while (::read(g_resized[0], &byte, 1) == 1) {
          const auto size = TerminalSize();
          if (!size) continue;
          v1::ShellInput in;
          in.mutable_resize()->set_rows(size->first);
          in.mutable_resize()->set_cols(size->second);
          if (!call->Send(in)) return;
        }
      }).detach();
    }
  }
  std::thread([call, tty] {
    std::string buffer(16384, '\0');
    for (;;) {
      const ssize_t n = ::read(STDIN_FILENO, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      v1::ShellInput in;
      in.set_input(buffer.data(), static_cast<size_t>(n));
      if (!call->Send(in)) return;
    }
    // Input that was not a terminal ended: the shell reads the end of it.
    if (!tty) {
      v1::ShellInput end;
      end.set_end_of_input(true);
      call->Send(end);
    }
  }).detach();

  std::optional<int> exit_code;
  v1::ShellOutput out;
  while (call->stream->Read(&out)) {
    if (out.has_output()) {
      const std::string& bytes = out.output();
      for (size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::write(STDOUT_FILENO, bytes.data() + done, bytes.size() - done);
        if (n <= 0 && errno != EINTR) break;
        if (n > 0) done += static_cast<size_t>(n);
      }
    } else if (out.has_exit_code()) {
      exit_code = out.exit_code();
      call->Close();  // the scheduler ends the call once we have it
    }
  }
  call->Close();
  const grpc::Status status = call->stream->Finish();
  raw.reset();
  connection.Check(status);
  if (!exit_code) ThrowFailure("the connection to the shell ended before the shell did");
  return *exit_code;
}

struct InteractiveOptions {
  std::string name = "interactive";
  std::string image = "host";
  std::string cluster;
  int gpus = 0;
  double hours = 1;
};

// Submits a run that sleeps for `hours`, waits until it runs, and connects to it.
int Interactive(CommandContext& context, const InteractiveOptions& o) {
  if (o.hours <= 0 || o.hours > 24 * 7) ThrowUsage("--hours: more than 0 and at most 168");
  v1::SubmitRunRequest request;
  v1::RunSpec* spec = request.mutable_spec();
  spec->set_name(o.name);
  spec->set_image(o.image);
  spec->set_command(absl::StrCat("sleep ", static_cast<int64_t>(o.hours * 3600)));
  spec->mutable_compute()->set_gpus(o.gpus);
  if (!o.cluster.empty()) spec->mutable_compute()->set_cluster(o.cluster);
  request.set_idempotency_key(NewUuid());
  Connection& connection = context.connection();
  auto runs = v1::RunService::NewStub(connection.channel());
  v1::SubmitRunResponse submitted;
  connection.Unary([&](grpc::ClientContext* c) { return runs->SubmitRun(c, request, &submitted); });
  const std::string name = submitted.run().name();
  context.err() << "Run " << name << " submitted; waiting for it to start (it runs for " << o.hours
                << " h; mcli stop run " << name << " ends it)\n";
  for (v1::RunStatus last = v1::RUN_STATUS_UNSPECIFIED;;) {
    v1::GetRunRequest get;
    get.set_name(name);
    v1::GetRunResponse got;
    connection.Unary([&](grpc::ClientContext* c) { return runs->GetRun(c, get, &got); });
    const v1::RunStatus status = got.run().status();
    if (status == v1::RUN_STATUS_RUNNING) break;
    if (IsTerminal(status)) {
      ThrowFailure(absl::StrCat("run ", name, " ended before it ran: ", ShortName(status), " ",
                                got.run().status_reason()));
    }
    if (status != last) context.err() << "  " << ShortName(status) << "\n";
    last = status;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ConnectOptions connect;
  connect.run = name;
  return Connect(context, connect);
}

}  // namespace

void AddConnectCommands(CLI::App& app, ActionSlot& slot) {
  auto options = std::make_shared<ConnectOptions>();
  CLI::App* connect = app.add_subcommand(
      "connect", "Open a shell inside a running run's container (the run's owner and admins)");
  connect->add_option("RUN", options->run, "Run name")->required();
  connect->add_option("--node-rank", options->node_rank, "On this node of the run")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  connect->add_option("--command", options->command,
                      "Run this (as sh -c does) instead of a login shell");
  OnParsed(connect, slot,
           [options](CommandContext& context) { return Connect(context, *options); });

  auto interactive = std::make_shared<InteractiveOptions>();
  CLI::App* i = app.add_subcommand("interactive",
                                   "Submit a run that waits, and open a shell in it once it runs");
  i->add_option("--name", interactive->name, "The run's name")->capture_default_str();
  i->add_option("--image", interactive->image, "Its image")->capture_default_str();
  i->add_option("--cluster", interactive->cluster, "Its cluster");
  i->add_option("--gpus", interactive->gpus, "Its GPUs")->check(CLI::NonNegativeNumber);
  i->add_option("--hours", interactive->hours, "How long it waits for you")->capture_default_str();
  OnParsed(i, slot,
           [interactive](CommandContext& context) { return Interactive(context, *interactive); });
}

}  // namespace tessera::cli
