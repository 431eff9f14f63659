// Starting, watching and stopping the rank processes of a run on one node.
//
// A rank runs `/bin/sh -c command` in a session and process group of its own (no controlling
// terminal: nothing reaches the terminal a worker was started from), so that everything it
// spawns (a launcher's children, `sleep 100 &` in a script) is signalled together: stopping a rank
// sends SIGTERM to the whole group, waits for a grace period, then sends SIGKILL to whatever is
// left. Time is injectable (Clock) so the grace logic can be driven by a fake clock in tests.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "worker/daemon/rank_identity.h"

namespace tessera::worker {

struct RankSpec {
  int rank = 0;
  int local_rank = 0;
  std::string command;                     // run as `shell -c command`
  std::map<std::string, std::string> env;  // the rank's whole environment (see Start)
  std::string working_dir;                 // created if missing; empty: the daemon's own
  // Appended to; created if missing. A relative path is relative to working_dir; empty means
  // /dev/null.
  std::string stdout_path;
  std::string stderr_path;
  // Descriptors the process gets as its stdin and stdout instead (-1: /dev/null and stdout_path):
  // the ends of pipes to a helper the worker talks to, such as a canary server. The caller keeps
  // its own; the process gets copies.
  int stdin_fd = -1;
  int stdout_fd = -1;
  std::string shell = "/bin/sh";
  // Run as this user (its uid, gid and no other groups); nullopt: the worker's own.
  std::optional<RankIdentity> identity;
  // When `sandbox_program` is set, the rank runs in a sandbox: bubblewrap with
  // `sandbox_options`, its command the sandbox's init running `shell` on the command as a
  // script (sandbox::kCommandPath). The options, the environment (bubblewrap's --clearenv and
  // --setenv, applied inside) and the command reach bubblewrap through descriptors (--args,
  // --ro-bind-data), never through its argv or its own environment: nothing of the run's
  // (LD_PRELOAD, LD_AUDIT ...) reaches a process outside the sandbox, and no size limit of
  // execve applies to what the run says. Bubblewrap runs with SIGTERM, SIGINT and SIGHUP
  // ignored so that a stop signal to the group reaches the command and not the sandbox
  // (sandbox_spec.h).
  std::string sandbox_program;
  std::vector<std::string> sandbox_options;
  // The seccomp filter the command runs under (a BPF program, bubblewrap's --seccomp, also
  // through a descriptor); empty: none.
  std::string sandbox_seccomp;
  // cgroup.procs files the rank joins (writing "0") before it drops its privileges.
  std::vector<std::string> cgroup_procs;
  // The nice value the rank runs at (0-19; 0: the worker's own): the node's daemons first.
  int nice = 0;
};

// How a rank process ended: either it exited (signal == 0, exit_code its status) or a signal
// killed it (signal != 0, exit_code -1). exit_code is also -1 when the status was lost.
struct ExitInfo {
  int exit_code = -1;
  int signal = 0;
  // The worker could not learn how the rank ended: a fault of Tessera, not of the rank.
  bool status_lost = false;

  bool signaled() const { return signal != 0; }
  std::string ToString() const;
  friend bool operator==(const ExitInfo&, const ExitInfo&) = default;
};

// Waiting reads the time and sleeps through the project's injectable Clock
// (base/clock.h); the default is the monotonic clock, so a step of the wall clock neither ends a
// wait early nor stretches it.
inline Clock& RealClock() { return *MonotonicClock::Shared(); }

// One rank process (the leader of its own process group). Thread-safe.
class RankProcess {
 public:
  // Starts spec.command. The environment is exactly spec.env plus PATH, HOME, USER and LANG
  // taken from the daemon when spec.env does not set them. Errors (a working folder that cannot
  // be created or entered, an output file that cannot be opened, a shell that cannot be
  // executed) come back as a status naming the path; nothing is left running then. A command
  // and environment over the kernel's limits for execve (unsandboxed only: a sandbox takes any
  // size) are INVALID_ARGUMENT: the run's own doing.
  static absl::StatusOr<std::unique_ptr<RankProcess>> Start(const RankSpec& spec);

  // Kills the whole group with SIGKILL and reaps the leader if that has not happened yet.
  ~RankProcess();
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  pid_t pid() const { return pid_; }  // also the process group id
  int rank() const { return rank_; }

  // Non-blocking reap; true once the process has exited (and been reaped).
  bool Poll();
  // How the process ended, once Poll (or a wait) has seen it exit.
  std::optional<ExitInfo> exit() const;

  // SIGTERM / SIGKILL to the whole process group. OK when the group is already gone.
  absl::Status Terminate();
  absl::Status Kill();

  // Waits up to `timeout` for the process to exit; DeadlineExceeded if it is still running.
  absl::StatusOr<ExitInfo> WaitFor(absl::Duration timeout, Clock& clock = RealClock());

  // SIGTERM to the group, up to `grace` for the leader to exit, then SIGKILL to the group
  // (always, so no member outlives the stop) and reap the leader. Returns how it ended.
  absl::StatusOr<ExitInfo> Stop(absl::Duration grace, Clock& clock = RealClock());

 private:
  RankProcess(pid_t pid, int rank) : pid_(pid), rank_(rank) {}
  absl::Status SignalGroup(int sig);
  bool PollLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ExitInfo ReapBlocking();  // after SIGKILL: waits for the leader

  const pid_t pid_;
  const int rank_;
  mutable absl::Mutex mu_;
  std::optional<ExitInfo> exit_ ABSL_GUARDED_BY(mu_);
};

// Stops several ranks together: SIGTERM to every group, up to `grace` for all of them to exit,
// SIGKILL to every group (stragglers and leftover members), then reaps every leader. Returns
// each process's ExitInfo, in the order given. Null entries get a default ExitInfo.
std::vector<ExitInfo> StopAll(const std::vector<RankProcess*>& procs, absl::Duration grace,
                              Clock& clock = RealClock());

}  // namespace tessera::worker
