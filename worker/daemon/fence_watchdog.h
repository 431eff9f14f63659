// Fencing that survives the worker itself. The worker writes its lease deadline to
// <state>/lease; a small watchdog process (tessera-worker fence-watchdog, in its own session so
// signals meant for the worker do not reach it) kills every recorded rank once the deadline is
// within the margin. The deadline is a time of the machine-wide monotonic clock (MonotonicClock),
// so a step of the wall clock moves nothing. So the ranks die in time even when the worker is
// frozen (SIGSTOP, a stuck kernel call) or killed, not only when it is cut off from the network.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::worker {

class LeaseFile {
 public:
  explicit LeaseFile(const std::string& state_dir);
  ~LeaseFile();
  // The time by which the ranks must be dead; written in place (8 bytes, one pwrite).
  void Write(absl::Time deadline);
  static std::string PathIn(const std::string& state_dir) { return state_dir + "/lease"; }

 private:
  int fd_ = -1;
};

// Starts the watchdog for `state_dir`; it lives until it has fenced after the worker died, or
// until it is killed (the worker kills a previous incarnation's watchdog when it starts).
absl::StatusOr<pid_t> SpawnFenceWatchdog(const std::string& state_dir, absl::Duration margin);
// Kills the watchdog recorded in `state_dir` by an earlier incarnation, if it still runs.
void StopPreviousWatchdog(const std::string& state_dir);

// The watchdog's main loop (argv: fence-watchdog STATE_DIR MARGIN_MS WORKER_PID).
int FenceWatchdogMain(const std::string& state_dir, absl::Duration margin, pid_t worker);

}  // namespace tessera::worker
