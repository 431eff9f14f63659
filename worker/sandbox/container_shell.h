#pragma once
// A shell inside a running sandbox (mcli connect): a process that joins the sandbox's
// namespaces (user, mount and root, PID, IPC, UTS, cgroup), its cgroups (so its limits hold),
// its uid and gid, and runs under the ranks' seccomp filter, with the sandbox's environment and
// working folder, on a PTY the worker relays.

#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::worker::sandbox {

// A process inside the sandbox whose outermost process (bubblewrap) is `outer`: the child of its
// first descendant in another PID namespace (the sandbox's init, with the run's environment and
// working folder). NOT_FOUND when there is none (the sandbox has ended, or `outer` runs without
// one).
absl::StatusOr<pid_t> ProcessInsideSandbox(pid_t outer, const std::string& proc = "/proc");

struct ContainerShell {
  pid_t inside = 0;     // a process of the sandbox (ProcessInsideSandbox)
  // The shell's stdin, and its stdout and stderr: a PTY's secondary end for both (`tty`, which
  // becomes its controlling terminal), or two pipes' ends.
  int input = -1;
  int output = -1;
  bool tty = false;
  std::string command;  // `sh -c` this; empty: a login shell (bash, else sh)
  std::string term;     // TERM; empty: the sandbox's own
  std::string seccomp;  // the ranks' filter (RankSeccompProgram)
};

// How a child is forked: the worker's ForkOwnedChild, so that its reaper leaves the shell's
// status to the session.
using ForkChild = std::function<pid_t(const std::function<void()>& in_child)>;

// Starts the shell; returns the pid of its keeper (a process outside the sandbox's PID namespace
// that waits for the shell and exits with its status: 128 + the signal when one killed it;
// SIGTERM to the keeper kills the shell). Errors: what of the sandbox could not be read (it
// ended). What fails inside the child is printed to the terminal and the keeper exits 126.
absl::StatusOr<pid_t> StartContainerShell(const ContainerShell& shell, ForkChild fork_child);

}  // namespace tessera::worker::sandbox
