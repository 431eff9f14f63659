#include "worker/daemon/shell_sessions.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "transport/endpoints.h"
#include "worker/common/worker_channel.h"
#include "worker/daemon/owned_children.h"
#include "worker/sandbox/container_shell.h"

namespace tessera::worker {
namespace {

// To a PTY (`tty`) or a socket: never SIGPIPE, whose default would end the worker.
bool WriteAll(int fd, const std::string& bytes, bool tty) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = tty ? ::write(fd, bytes.data() + done, bytes.size() - done)
                          : ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The caller's terminal: a PTY of its size (its secondary end, `theirs`, the shell's
// controlling terminal). Without one, a socket pair: bytes in and out as they are, and the end
// of the caller's input is the end of the shell's (a PTY could only say so with a ^D, which a
// shell that set its terminal's modes may never read).
absl::Status OpenTerminal(const v1::ShellOpen& open, int* ours, int* theirs) {
  if (open.tty()) {
    winsize size{};
    size.ws_row = static_cast<unsigned short>(open.rows() > 0 ? open.rows() : 24);
    size.ws_col = static_cast<unsigned short>(open.cols() > 0 ? open.cols() : 80);
    if (::openpty(ours, theirs, nullptr, nullptr, &size) != 0) {
      return absl::InternalError(absl::StrCat("openpty: ", std::strerror(errno)));
    }
    ::fcntl(*ours, F_SETFD, FD_CLOEXEC);
    return absl::OkStatus();
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  *ours = pair[0];
  *theirs = pair[1];
  return absl::OkStatus();
}

// Forwards what the shell writes to `master` until `shell` exits, then what it printed last;
// returns its exit code (128 + the signal that ended it).
int PumpOutput(int master, pid_t shell, const std::function<void(const char*, size_t)>& forward) {
  int exit_code = 255;
  std::string chunk(16384, '\0');
  for (;;) {
    pollfd p{master, POLLIN, 0};
    const int ready = ::poll(&p, 1, 200);
    ssize_t n = 0;
    if (ready > 0) {
      n = ::read(master, chunk.data(), chunk.size());
      if (n > 0) {
        forward(chunk.data(), static_cast<size_t>(n));
        continue;
      }
    }
    int status = 0;
    if (::waitpid(shell, &status, WNOHANG) == shell) {
      exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    // The terminal hung up while the keeper still waits: do not spin.
    if (ready > 0 && n <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ReleaseOwnedChild(shell);
  // What the shell printed last, still in the terminal.
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  for (ssize_t n; (n = ::read(master, chunk.data(), chunk.size())) > 0;) {
    forward(chunk.data(), static_cast<size_t>(n));
  }
  return exit_code;
}

}  // namespace

ShellSessions::ShellSessions(ShellSessionsOptions options, OuterPid outer_pid)
    : options_(std::move(options)), outer_pid_(std::move(outer_pid)) {
  for (const std::string& e : SplitEndpoints(options_.endpoint)) endpoints_.push_back(e);
  if (endpoints_.empty()) endpoints_.push_back(options_.endpoint);
}

ShellSessions::~ShellSessions() {
  stopping_ = true;
  std::list<Session> sessions;
  {
    absl::MutexLock lock(&mu_);
    if (listen_ctx_) listen_ctx_->TryCancel();
    for (auto& s : sessions_) s.ctx->TryCancel();
    sessions.swap(sessions_);
  }
  if (listener_.joinable()) listener_.join();
  for (auto& s : sessions) s.thread.join();
}

void ShellSessions::Start() {
  listener_ = std::thread([this] { ListenLoop(); });
}

std::shared_ptr<grpc::ClientContext> ShellSessions::Context() const {
  auto ctx = std::make_shared<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + options_.api_key);
  return ctx;
}

void ShellSessions::ReapSessionsLocked() {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (*it->done) {
      it->thread.join();
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

void ShellSessions::ListenLoop() {
  size_t current = 0;
  int failures = 0;
  while (!stopping_) {
    const std::string endpoint = endpoints_[current];
    auto stub = v1::ShellRelay::NewStub(WorkerChannel(endpoint, options_.tls));
    auto ctx = Context();
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      listen_ctx_ = ctx;
    }
    // Renewed every two minutes: after a failover the new leader hears of this node within that.
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(2));
    auto reader = stub->Listen(ctx.get());
    reader->Write(v1::ShellListenRequest());
    v1::ShellSessionStart start;
    while (reader->Read(&start)) {
      failures = 0;
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      ReapSessionsLocked();
      Session s{std::thread(), Context(), std::make_shared<std::atomic<bool>>(false)};
      s.thread = std::thread([this, start, ctx = s.ctx, done = s.done, endpoint] {
        Serve(start, *ctx, endpoint);
        *done = true;
      });
      sessions_.push_back(std::move(s));
    }
    reader->WritesDone();
    const grpc::Status st = reader->Finish();
    if (stopping_) break;
    if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) continue;  // its renewal
    // A standby, an instance that went, or one not reached: the next, after a short wait.
    spdlog::debug("shell sessions: Listen at {} ended: {}", endpoint, st.error_message());
    current = (current + 1) % endpoints_.size();
    const auto wait = std::chrono::milliseconds(std::min(5000, 200 * ++failures));
    for (auto waited = std::chrono::milliseconds(0); waited < wait && !stopping_;
         waited += std::chrono::milliseconds(100)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

void ShellSessions::Serve(const v1::ShellSessionStart& start, grpc::ClientContext& ctx,
                          const std::string& endpoint) {
  auto stub = v1::ShellRelay::NewStub(WorkerChannel(endpoint, options_.tls));
  auto stream = stub->Attach(&ctx);
  absl::Mutex write_mu;
  auto send = [&](const v1::ShellNodeMessage& m) {
    absl::MutexLock lock(&write_mu);
    return stream->Write(m);
  };
  v1::ShellNodeMessage hello;
  hello.set_session_id(start.session_id());
  if (!send(hello)) {
    (void)stream->Finish();
    return;
  }
  const v1::ShellOpen& open = start.open();
  auto refuse = [&](const std::string& why) {
    spdlog::warn("shell for run {} refused: {}", start.run_id(), why);
    v1::ShellNodeMessage m;
    m.set_refused(why);
    send(m);
    stream->WritesDone();
    (void)stream->Finish();
  };
  auto outer = outer_pid_(start.run_id(), start.resumption_index());
  if (!outer.ok()) return refuse(std::string(outer.status().message()));
  auto inside = sandbox::ProcessInsideSandbox(*outer);
  if (!inside.ok()) return refuse(std::string(inside.status().message()));
  const bool tty = open.tty();
  int ours = -1, theirs = -1;
  if (absl::Status st = OpenTerminal(open, &ours, &theirs); !st.ok()) {
    return refuse(std::string(st.message()));
  }
  auto keeper = sandbox::StartContainerShell({.inside = *inside,
                                              .input = theirs,
                                              .output = theirs,
                                              .tty = tty,
                                              .command = open.command(),
                                              .term = open.term(),
                                              .seccomp = options_.seccomp},
                                             ForkOwnedChild);
  ::close(theirs);
  const int master = ours;
  if (!keeper.ok()) {
    ::close(master);
    return refuse(std::string(keeper.status().message()));
  }
  spdlog::info("shell session {}: run {} attempt {} (pid {})", start.session_id(), start.run_id(),
               start.resumption_index(), *keeper);
  v1::ShellNodeMessage opened;
  opened.mutable_output()->set_output("");
  send(opened);

  std::atomic<bool> ended{false};
  const pid_t shell = *keeper;
  std::thread input([&] {
    v1::ShellInput in;
    while (stream->Read(&in)) {
      if (in.has_input()) {
        WriteAll(master, in.input(), tty);
      } else if (in.has_resize()) {
        winsize w{};
        w.ws_row = static_cast<unsigned short>(in.resize().rows());
        w.ws_col = static_cast<unsigned short>(in.resize().cols());
        ::ioctl(master, TIOCSWINSZ, &w);
      } else if (in.has_end_of_input() && !tty) {
        ::shutdown(master, SHUT_WR);
      }
    }
    // The caller went, or the session was cut: the shell goes too (the run does not).
    if (!ended) ::kill(shell, SIGTERM);
  });
  const int exit_code = PumpOutput(master, shell, [&](const char* data, size_t size) {
    v1::ShellNodeMessage m;
    m.mutable_output()->set_output(data, size);
    send(m);
  });
  ended = true;
  v1::ShellNodeMessage exit;
  exit.mutable_output()->set_exit_code(exit_code);
  send(exit);
  {
    absl::MutexLock lock(&write_mu);
    stream->WritesDone();
  }
  // The scheduler ends the call once the caller has the exit code.
  input.join();
  const grpc::Status st = stream->Finish();
  ::close(master);
  spdlog::info("shell session {} ended: exit code {}{}", start.session_id(), exit_code,
               st.ok() ? "" : absl::StrCat(" (", st.error_message(), ")"));
}

}  // namespace tessera::worker
