// Memory, CPU and process limits for a rank, through the node's cgroups where it offers them.
//
// cgroup v1 (separate `memory` and `cpu` hierarchies, as on these machines) and v2 (one
// unified hierarchy with the memory and cpu controllers) are both handled. Each rank gets
// <hierarchy>/tessera/<name>; the rank's process joins it itself, between fork and exec, by
// writing "0" to the cgroup.procs files opened for it, so everything it starts is inside from
// its first instruction. Where the worker cannot create cgroups (not root, no controllers, a
// read-only /sys/fs/cgroup) limits cannot be enforced: Detect says why, the worker logs it once
// at start and exports it as a node label, and ranks run without limits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::worker::sandbox {

struct ResourceLimits {
  int64_t memory_bytes = 0;  // 0: unlimited
  double cpus = 0;           // cores; 0: unlimited
  // Processes and threads (the pids controller); 0: unlimited. A fork bomb stops here.
  int64_t processes = 0;
  bool any() const { return memory_bytes > 0 || cpus > 0 || processes > 0; }
};

class Cgroups {
 public:
  // Looks at the hierarchy under `root`; `parent` is the folder Tessera's cgroups live in.
  static Cgroups Detect(const std::string& root = "/sys/fs/cgroup",
                        const std::string& parent = "tessera");

  bool available() const { return why_not_.empty(); }
  // Why limits cannot be enforced on this node; empty when they can.
  const std::string& why_not() const { return why_not_; }
  const char* version() const { return v2_ ? "v2" : "v1"; }
  // Whether ResourceLimits::processes can be enforced (the pids controller is there).
  bool limits_processes() const { return available() && !pids_dir_.empty(); }

  // Creates the cgroup(s) `name` with `limits` and returns the cgroup.procs files the rank
  // must write "0" into. FAILED_PRECONDITION when not available or a write fails.
  absl::StatusOr<std::vector<std::string>> Create(const std::string& name,
                                                  const ResourceLimits& limits) const;
  // Removes the cgroup(s) `name` once their processes are gone (best effort).
  void Remove(const std::string& name) const;
  // How many processes of cgroup `name` the kernel killed for exceeding its memory limit
  // (memory.events on v2, memory.oom_control on v1); 0 where it does not say.
  int64_t OomKills(const std::string& name) const;

 private:
  bool v2_ = false;
  std::string memory_dir_, cpu_dir_;  // the parents (the same folder on v2)
  std::string pids_dir_;              // empty: no pids controller, processes not limited
  std::string why_not_;
};

}  // namespace tessera::worker::sandbox
