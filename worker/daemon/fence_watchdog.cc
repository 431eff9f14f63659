#include "worker/daemon/fence_watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "worker/daemon/attempt_record.h"

namespace tessera::worker {
namespace {

std::string PidPath(const std::string& state_dir) { return state_dir + "/watchdog.pid"; }

std::optional<absl::Time> ReadDeadline(const std::string& state_dir) {
  int fd = ::open(LeaseFile::PathIn(state_dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  int64_t nanos = 0;
  const ssize_t n = ::pread(fd, &nanos, sizeof nanos, 0);
  ::close(fd);
  if (n != sizeof nanos || nanos == 0) return std::nullopt;
  return absl::FromUnixNanos(nanos);
}

}  // namespace

LeaseFile::LeaseFile(const std::string& state_dir) {
  fd_ = ::open(PathIn(state_dir).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) spdlog::error("opening {}: {}", PathIn(state_dir), strerror(errno));
  // No deadline until the first registration: nothing runs before it.
  Write(absl::UnixEpoch());
}

LeaseFile::~LeaseFile() {
  if (fd_ >= 0) ::close(fd_);
}

void LeaseFile::Write(absl::Time deadline) {
  if (fd_ < 0) return;
  const int64_t nanos = absl::ToUnixNanos(deadline);
  (void)::pwrite(fd_, &nanos, sizeof nanos, 0);
}

absl::StatusOr<pid_t> SpawnFenceWatchdog(const std::string& state_dir, absl::Duration margin) {
  const std::string margin_ms = std::to_string(absl::ToInt64Milliseconds(margin));
  const std::string parent = std::to_string(::getpid());
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    ::setsid();
    const char* argv[] = {"tessera-worker",  "fence-watchdog", state_dir.c_str(),
                          margin_ms.c_str(), parent.c_str(),   nullptr};
    ::execv("/proc/self/exe", const_cast<char* const*>(argv));
    _exit(127);
  }
  std::ofstream(PidPath(state_dir)) << pid << '\n';
  return pid;
}

void StopPreviousWatchdog(const std::string& state_dir) {
  std::ifstream in(PidPath(state_dir));
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 0) return;
  // Only if it is one: the pid may have been reused.
  std::ifstream cmdline(absl::StrCat("/proc/", pid, "/cmdline"));
  std::string args((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  if (args.find("fence-watchdog") == std::string::npos) return;
  ::kill(pid, SIGKILL);
}

// What wakes the watchdog: the worker writing its deadline (inotify on the lease file) and the
// worker's exit (a pidfd). Between them it sleeps until the deadline, so an idle node's watchdog
// wakes once per lease renewal instead of every few milliseconds. Either source may be missing
// (an old kernel, a file replaced): then it looks every kFallbackLook, as it always did.
class WatchdogWakeups {
 public:
  WatchdogWakeups(const std::string& lease_path, pid_t worker) : lease_path_(lease_path) {
    notify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    Rewatch();
    worker_fd_ = static_cast<int>(::syscall(SYS_pidfd_open, worker, 0));
  }
  ~WatchdogWakeups() {
    if (notify_fd_ >= 0) ::close(notify_fd_);
    if (worker_fd_ >= 0) ::close(worker_fd_);
  }

  // Sleeps for up to `wait`, or until the deadline is written or the worker exits. True when
  // the worker has exited (a zombie not yet reaped by its parent counts: kill(0) would not tell).
  bool Sleep(absl::Duration wait, bool worker_gone) {
    Rewatch();
    const bool complete = watch_ >= 0 && (worker_gone || worker_fd_ >= 0);
    if (!complete) wait = std::min(wait, kFallbackLook);
    pollfd fds[2] = {{notify_fd_, POLLIN, 0}, {worker_gone ? -1 : worker_fd_, POLLIN, 0}};
    const int ms =
        wait == absl::InfiniteDuration()
            ? -1
            : static_cast<int>(std::clamp<int64_t>(
                  absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))), 0, 60'000));
    if (::poll(fds, 2, ms) <= 0) return false;
    if (fds[0].revents & POLLIN) Drain();
    return (fds[1].revents & POLLIN) != 0;
  }

  static constexpr absl::Duration kFallbackLook = absl::Milliseconds(20);

 private:
  void Rewatch() {
    if (notify_fd_ < 0 || watch_ >= 0) return;
    watch_ = ::inotify_add_watch(notify_fd_, lease_path_.c_str(),
                                 IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF);
  }
  void Drain() {
    alignas(inotify_event) char buf[4096];
    ssize_t n;
    while ((n = ::read(notify_fd_, buf, sizeof buf)) > 0) {
      for (ssize_t at = 0; at < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
        // The file went (replaced by a restarted worker's): watch the new one.
        if (e->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
          if (watch_ >= 0) (void)::inotify_rm_watch(notify_fd_, watch_);
          watch_ = -1;
        }
        at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
  }

  const std::string lease_path_;
  int notify_fd_ = -1;
  int watch_ = -1;
  int worker_fd_ = -1;
};

int FenceWatchdogMain(const std::string& state_dir, absl::Duration margin, pid_t worker) {
  AttemptRecords records(state_dir);
  // The worker writes its deadline on the same machine-wide monotonic clock.
  const MonotonicClock monotonic;
  WatchdogWakeups wakeups(LeaseFile::PathIn(state_dir), worker);
  bool fenced_once = false;
  bool worker_gone = false;
  while (true) {
    worker_gone = worker_gone || (::kill(worker, 0) != 0 && errno == ESRCH);
    const auto deadline = ReadDeadline(state_dir);
    const absl::Time now = monotonic.Now();
    const bool fencing = deadline && now >= *deadline - margin;
    if (fencing) {
      for (const auto& record : records.LoadAll(nullptr)) {
        auto killed = KillRecordedRanks(record);
        if (!killed.empty()) {
          spdlog::error("fence watchdog: lease of {} ended {} ago; killed {} rank(s) of run {}",
                        state_dir, absl::FormatDuration(now - *deadline), killed.size(),
                        record.run_id);
        }
      }
      fenced_once = true;
    }
    if (worker_gone && (fenced_once || !deadline)) return 0;
    // Past the deadline, look often: a rank started late (a start read just before the cut)
    // dies too. Before it, nothing is due until the deadline or a new one.
    const absl::Duration wait = fencing    ? WatchdogWakeups::kFallbackLook
                                : deadline ? *deadline - margin - now
                                           : absl::InfiniteDuration();
    if (wakeups.Sleep(wait, worker_gone)) worker_gone = true;
  }
}

}  // namespace tessera::worker
