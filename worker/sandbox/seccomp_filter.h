// The seccomp filter every rank's sandbox runs under (bubblewrap's --seccomp), like the
// container runtimes' default profile: a run's processes may do what a training job does, but
// not make user namespaces (the way to privileges inside), reach the kernel's keyrings, load BPF
// programs, watch other processes' performance counters, mount, load kernel modules, replace
// the kernel, or push characters into a terminal (TIOCSTI). Those calls fail with EPERM; the
// 32-bit system-call entry, which a filter for x86-64 cannot read, kills the process.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::worker::sandbox {

// The system calls refused outright, by name (for the docs and the tests).
const std::vector<std::string>& RefusedSystemCalls();

// The filter as a classic BPF program (what bubblewrap's --seccomp reads), built with
// libseccomp for this machine's architecture.
absl::StatusOr<std::string> RankSeccompProgram();

}  // namespace tessera::worker::sandbox
