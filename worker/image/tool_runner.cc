#include "worker/image/tool_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/clock.h"

namespace tessera::worker::image {
namespace {

// Enough for any error a tool prints last; a long pull's progress lines must not grow without end.
constexpr size_t kMaxOutput = 64 * 1024;

std::string ToolName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

absl::Status ErrnoStatus(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Reads what is there without blocking. Returns false at end of file.
bool ReadAvailable(int fd, std::string* out) {
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      if (out->size() > kMaxOutput) out->erase(0, out->size() - kMaxOutput);  // keep the tail
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n != 0;  // EAGAIN: nothing more for now; 0: the last writer closed
  }
}

int WaitStatus(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Called only in the child, between fork and exec: async-signal-safe calls alone, since another
// thread of the parent may have held a lock (malloc's, spdlog's) at the moment of the fork.
[[noreturn]] void ExecChild(char* const* args, int devnull, int out, int err) {
  ::setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // the parent's blocked signals must not carry over
  ::signal(SIGPIPE, SIG_DFL);
  if (::dup2(devnull, 0) >= 0 && ::dup2(out, 1) >= 0 && ::dup2(out, 2) >= 0) {
    // glibc's execvp searches PATH with buffers on the stack: it allocates nothing.
    ::execvp(args[0], args);
  }
  const int e = errno;
  ssize_t ignored = ::write(err, &e, sizeof e);  // err is close-on-exec: silent when exec worked
  (void)ignored;
  ::_exit(127);
}

}  // namespace

std::string LastLine(const std::string& output) {
  absl::string_view rest = absl::StripTrailingAsciiWhitespace(output);
  const size_t newline = rest.rfind('\n');
  return std::string(absl::StripAsciiWhitespace(
      newline == absl::string_view::npos ? rest : rest.substr(newline + 1)));
}

absl::StatusOr<ProcessToolRunner::Spawned> ProcessToolRunner::Spawn(
    const std::vector<std::string>& argv, const std::string& tool) {
  std::vector<char*> args;  // built before the fork: the child must not allocate
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  // All close-on-exec, so that a tool (or a child another thread forks meanwhile) keeps none of
  // them open: the output pipe must reach end of file when the tool is done.
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  if (::pipe2(err, O_CLOEXEC) != 0) {
    absl::Status st = ErrnoStatus("pipe2");
    CloseFd(out[0]), CloseFd(out[1]);
    return st;
  }
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const auto close_all = [&] {
    CloseFd(out[0]), CloseFd(out[1]), CloseFd(err[0]), CloseFd(err[1]), CloseFd(devnull);
  };
  if (devnull < 0) {
    absl::Status st = ErrnoStatus("open /dev/null");
    close_all();
    return st;
  }

  const std::function<void()> in_child = [&] { ExecChild(args.data(), devnull, out[1], err[1]); };
  pid_t pid = -1;
  if (hooks_.fork) {
    pid = hooks_.fork(in_child);
  } else {
    pid = ::fork();
    if (pid == 0) in_child();
  }
  if (pid < 0) {
    absl::Status st = ErrnoStatus("fork");
    close_all();
    return st;
  }
  // The parent sets the group too: whichever of the two runs first, the group exists before a
  // timeout could kill it. EACCES once the child has exec'd is fine: it set the group itself.
  ::setpgid(pid, pid);
  CloseFd(out[1]), CloseFd(err[1]), CloseFd(devnull);

  // exec closes the error pipe (end of file); a failed exec writes its errno first.
  int child_errno = 0;
  ssize_t n = 0;
  do {
    n = ::read(err[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  CloseFd(err[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    WaitStatus(pid);
    if (hooks_.reaped) hooks_.reaped(pid);
    CloseFd(out[0]);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", tool, ": ", std::strerror(child_errno)));
  }
  return Spawned{pid, out[0]};
}

absl::StatusOr<ToolResult> ProcessToolRunner::RunWatched(
    const std::vector<std::string>& argv, absl::Duration timeout,
    const std::function<absl::Status()>& keep_going) {
  if (argv.empty() || argv[0].empty()) return absl::InvalidArgumentError("no tool to run");
  const std::string tool = ToolName(argv[0]);
  if (cancelled_) {
    return absl::CancelledError(absl::StrCat(tool, " was not run: the worker is shutting down"));
  }
  auto spawned = Spawn(argv, tool);
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = spawned->pid;
  int output = spawned->output;
  const auto reaped = [&](pid_t p) {
    if (hooks_.reaped) hooks_.reaped(p);
  };
  ::fcntl(output, F_SETFL, O_NONBLOCK);
  MonotonicClock clock;
  const absl::Time deadline = clock.Now() + timeout;
  ToolResult result;
  bool open = true;
  for (;;) {
    // Whether the tool exited, without reaping it yet: while it is an unreaped zombie its process
    // group id cannot be reused, so killing the group below hits only what the tool left behind
    // (which could otherwise hold the output pipe open for ever).
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      ::killpg(pid, SIGKILL);
      if (open) ReadAvailable(output, &result.output);
      break;
    }
    if (cancelled_) {
      ::killpg(pid, SIGKILL);
      WaitStatus(pid);
      reaped(pid);
      CloseFd(output);
      return absl::CancelledError(absl::StrCat(tool, " was stopped: the worker is shutting down"));
    }
    if (keep_going) {
      if (absl::Status st = keep_going(); !st.ok()) {
        ::killpg(pid, SIGKILL);
        WaitStatus(pid);
        reaped(pid);
        CloseFd(output);
        return st;
      }
    }
    const absl::Duration left = deadline - clock.Now();
    if (left <= absl::ZeroDuration()) {
      ::killpg(pid, SIGKILL);
      WaitStatus(pid);
      reaped(pid);
      if (open) ReadAvailable(output, &result.output);
      CloseFd(output);
      const std::string last = LastLine(result.output);
      return absl::DeadlineExceededError(absl::StrCat(
          tool, " did not finish within ", absl::FormatDuration(timeout), " and was killed",
          last.empty() ? "" : absl::StrCat("; its last output: ", last)));
    }
    const int wait_ms =
        static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(left), 1, open ? 50 : 10));
    if (open) {
      pollfd p{output, POLLIN, 0};
      ::poll(&p, 1, wait_ms);
      open = ReadAvailable(output, &result.output);
    } else {
      ::poll(nullptr, 0, wait_ms);  // output closed, the tool still running: a short sleep
    }
  }
  const int status = WaitStatus(pid);
  reaped(pid);
  CloseFd(output);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

}  // namespace tessera::worker::image
