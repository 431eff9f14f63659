#include "worker/daemon/rank_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "worker/daemon/owned_children.h"
#include "worker/daemon/rank_exec.h"

namespace tessera::worker {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(10);

ExitInfo DecodeStatus(int status) {
  ExitInfo info;
  if (WIFEXITED(status)) {
    info.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    info.signal = WTERMSIG(status);
  }
  return info;
}

}  // namespace

std::string ExitInfo::ToString() const {
  if (status_lost) return "exit status lost";
  if (signal != 0) {
    const char* name = ::sigabbrev_np(signal);
    return absl::StrCat("killed by signal ", signal, name ? absl::StrCat(" (SIG", name, ")") : "");
  }
  return absl::StrCat("exit code ", exit_code);
}

absl::StatusOr<std::unique_ptr<RankProcess>> RankProcess::Start(const RankSpec& spec) {
  if (spec.command.empty()) return absl::InvalidArgumentError("rank command is empty");
  RankExec exec;
  if (absl::Status st = exec.Prepare(spec); !st.ok()) return st;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", ErrnoText(errno)));
  }
  UniqueFd pipe_read(pipe_fds[0]);
  UniqueFd pipe_write(pipe_fds[1]);
  const pid_t pid = ForkOwnedChild([&] { exec.ExecInChild(pipe_write.get()); });
  if (pid < 0) return absl::ResourceExhaustedError(absl::StrCat("fork: ", ErrnoText(errno)));
  // The read below returns once the child has exec'd (after its setsid) or failed: the group
  // exists when Start returns.
  pipe_write.Reset();

  ChildError child_error{};
  ssize_t n;
  do {
    n = ::read(pipe_read.get(), &child_error, sizeof child_error);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ReleaseOwnedChild(pid);
    return exec.Failure(child_error);
  }
  spdlog::info("rank {} (local rank {}) started: pid {} in '{}'", spec.rank, spec.local_rank, pid,
               spec.working_dir);
  return std::unique_ptr<RankProcess>(new RankProcess(pid, spec.rank));
}

RankProcess::~RankProcess() {
  bool running;
  {
    absl::MutexLock lock(&mu_);
    running = !PollLocked();
  }
  if (running) spdlog::warn("rank {} (pid {}) still running at teardown: killing it", rank_, pid_);
  (void)SignalGroup(SIGKILL);  // also members that outlived the leader
  if (running) ReapBlocking();
}

bool RankProcess::PollLocked() {
  if (exit_.has_value()) return true;
  int status;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  if (r == pid_) {
    exit_ = DecodeStatus(status);
    spdlog::info("rank {} (pid {}) ended: {}", rank_, pid_, exit_->ToString());
  } else {
    // ECHILD: someone else reaped it, which the owned-children registry exists to prevent. The
    // status is lost, and that is Tessera's failure, never the rank's.
    spdlog::error("rank {} (pid {}): waitpid failed ({}); exit status lost", rank_, pid_,
                  ErrnoText(errno));
    exit_ = ExitInfo{.status_lost = true};
  }
  ReleaseOwnedChild(pid_);
  return true;
}

bool RankProcess::Poll() {
  absl::MutexLock lock(&mu_);
  return PollLocked();
}

std::optional<ExitInfo> RankProcess::exit() const {
  absl::MutexLock lock(&mu_);
  return exit_;
}

ExitInfo RankProcess::ReapBlocking() {
  absl::MutexLock lock(&mu_);
  if (exit_.has_value()) return *exit_;
  int status;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  exit_ = r == pid_ ? DecodeStatus(status) : ExitInfo{.status_lost = true};
  ReleaseOwnedChild(pid_);
  spdlog::info("rank {} (pid {}) ended: {}", rank_, pid_, exit_->ToString());
  return *exit_;
}

absl::Status RankProcess::SignalGroup(int sig) {
  if (::killpg(pid_, sig) != 0 && errno != ESRCH) {
    return absl::InternalError(
        absl::StrCat("signal ", sig, " to process group ", pid_, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::Status RankProcess::Terminate() { return SignalGroup(SIGTERM); }
absl::Status RankProcess::Kill() { return SignalGroup(SIGKILL); }

absl::StatusOr<ExitInfo> RankProcess::WaitFor(absl::Duration timeout, Clock& clock) {
  const absl::Time deadline = clock.Now() + timeout;
  while (true) {
    if (Poll()) return *exit();
    const absl::Time now = clock.Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank_, " (pid ", pid_, ") still running after ", absl::FormatDuration(timeout)));
    }
    clock.SleepFor(std::min(deadline - now, kPollInterval));
  }
}

absl::StatusOr<ExitInfo> RankProcess::Stop(absl::Duration grace, Clock& clock) {
  if (absl::Status s = Terminate(); !s.ok()) return s;
  absl::StatusOr<ExitInfo> exited = WaitFor(grace, clock);
  if (!exited.ok()) {
    spdlog::warn("rank {} (pid {}) did not stop within {}: SIGKILL", rank_, pid_,
                 absl::FormatDuration(grace));
  }
  if (absl::Status s = Kill(); !s.ok()) return s;
  return exited.ok() ? *exited : ReapBlocking();
}

std::vector<ExitInfo> StopAll(const std::vector<RankProcess*>& procs, absl::Duration grace,
                              Clock& clock) {
  for (RankProcess* p : procs) {
    if (p == nullptr) continue;
    if (absl::Status s = p->Terminate(); !s.ok()) spdlog::warn("StopAll: {}", s.ToString());
  }
  const absl::Time deadline = clock.Now() + grace;
  while (true) {
    bool all_exited = true;
    for (RankProcess* p : procs) {
      if (p != nullptr && !p->Poll()) all_exited = false;
    }
    if (all_exited) break;
    const absl::Time now = clock.Now();
    if (now >= deadline) break;
    clock.SleepFor(std::min(deadline - now, kPollInterval));
  }
  std::vector<ExitInfo> result;
  result.reserve(procs.size());
  for (RankProcess* p : procs) {
    if (p == nullptr) continue;
    if (!p->Poll())
      spdlog::warn("rank {} (pid {}) did not stop within grace: SIGKILL", p->rank(), p->pid());
    if (absl::Status s = p->Kill(); !s.ok()) spdlog::warn("StopAll: {}", s.ToString());
  }
  for (RankProcess* p : procs) {
    if (p == nullptr) {
      result.push_back(ExitInfo{});
      continue;
    }
    // SIGKILL was sent to every group: the wait is bounded by the kernel delivering it.
    absl::StatusOr<ExitInfo> e = p->WaitFor(absl::InfiniteDuration(), RealClock());
    result.push_back(e.ok() ? *e : ExitInfo{});
  }
  return result;
}

}  // namespace tessera::worker
