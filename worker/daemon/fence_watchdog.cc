#include "worker/daemon/fence_watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

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

int FenceWatchdogMain(const std::string& state_dir, absl::Duration margin, pid_t worker) {
  AttemptRecords records(state_dir);
  // The worker writes its deadline on the same machine-wide monotonic clock.
  const MonotonicClock monotonic;
  bool fenced_once = false;
  while (true) {
    const bool worker_gone = ::kill(worker, 0) != 0 && errno == ESRCH;
    const auto deadline = ReadDeadline(state_dir);
    const absl::Time now = monotonic.Now();
    if (deadline && now >= *deadline - margin) {
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
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace tessera::worker
