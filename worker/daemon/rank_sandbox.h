// Puts a rank into its sandbox (worker/sandbox/): the root it runs in (its image, or the
// node's own root for `image: host`), the folders it may write, the GPUs it was given, its
// /dev/shm, its cgroup limits, and what the worker keeps from it (the state folder, with the
// worker's keys and every other attempt's files, is covered by an empty tmpfs).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/rank_environment.h"
#include "worker/daemon/rank_launcher.h"
#include "worker/sandbox/cgroup_limits.h"
#include "worker/sandbox/gpu_access.h"
#include "worker/sandbox/sandbox_spec.h"

namespace tessera::worker {

// Inside an image: the rank's work folder (/tessera/work), progress folder, parameters file and
// shared folders (/tessera/user-shared, /tessera/shared-N).
inline constexpr char kInImageRoot[] = "/tessera";
// Where a node container's command finds the run's parameters as YAML, as under mcli.
inline constexpr char kMcliParametersPath[] = "/mnt/config/parameters.yaml";

struct RankSandboxOptions {
  std::string bwrap = "/usr/bin/bwrap";
  std::string init_path;        // tessera-sandbox-init
  std::string state_dir;        // the worker's: hidden from every rank
  sandbox::GpuNodeOptions gpu;  // the GPUs' device nodes, the driver's files
  int64_t shm_bytes = 0;
  // Folders of the cluster (datasets, checkpoints) every rank writes, at the same path.
  std::vector<std::string> shared_dirs;
  sandbox::ResourceLimits limits;  // per rank
  // limits.memory_bytes is the rank's share of the node (RankMemoryShare), set by the worker
  // once it knows its GPUs (--rank-memory-limit auto).
  bool memory_by_node_share = false;
  // /tmp per rank (a tmpfs: memory, counted against the memory limit); 0: the kernel's default,
  // half of the node's memory.
  int64_t tmp_bytes = 0;
};

// A rank's share of a node's memory: the memory less a reserve for the system and the worker
// (2 GiB, or 1/16 of it where that is more), divided among its GPUs (1 on a node without GPUs),
// rounded down to 64 KiB, a whole number of pages of any size the kernel uses (it keeps a
// cgroup's limit in pages, so an unrounded limit would read back as another number); 0 (no
// limit) where nothing is left.
inline int64_t RankMemoryShare(int64_t node_memory_bytes, int node_gpus) {
  const int64_t reserve = std::max<int64_t>(int64_t{2} << 30, node_memory_bytes / 16);
  if (node_memory_bytes <= reserve) return 0;
  constexpr int64_t kGranule = 64 << 10;
  return (node_memory_bytes - reserve) / std::max(1, node_gpus) / kGranule * kGranule;
}

// The root an attempt's ranks run in.
struct RankRoot {
  std::string rootfs = "/";      // an unpacked image, or "/" for the host
  std::vector<std::string> env;  // the image's environment ("KEY=VALUE"); empty on the host
};

class RankSandbox {
 public:
  explicit RankSandbox(RankSandboxOptions options);

  // FAILED_PRECONDITION naming what is missing (bwrap, the init program, user namespaces).
  absl::Status Check() const;
  const sandbox::Cgroups& cgroups() const { return cgroups_; }
  bool limits_wanted() const { return options_.limits.any() || options_.memory_by_node_share; }
  const RankSandboxOptions& options() const { return options_; }
  // The ranks' seccomp filter (empty where it could not be built: Check says so).
  std::string seccomp_program() const { return seccomp_.ok() ? *seccomp_ : std::string(); }

  // Where the kernel killed a rank for exceeding its memory limit, a line that says so (for the
  // rank's log: its exit code alone, 137, does not tell a user why); nullopt otherwise.
  std::optional<std::string> OutOfMemoryNote(const v1::StartAttempt& start, int rank) const;
  // Where a rank's memory limit comes from, for the note above.
  std::string LimitSource() const;

  // Fills spec.sandbox_program, spec.sandbox_options and spec.cgroup_procs and adds the image's
  // environment (the run's own and Tessera's variables win). `gpus` are the GPUs the sandbox
  // holds: a rank's one, or a node container's every GPU of the run in local-rank order. A node
  // container (LaunchesPerNode) also has the parameters at kMcliParametersPath, and a /dev/shm
  // and cgroup limits of its local ranks' shares added. `extra` are more binds, each at its
  // target for this root (RankSpecBuilder chooses): the user's shared folder, the run's memory
  // folder, the run's secret files.
  absl::Status Apply(const v1::StartAttempt& start, const AttemptPaths& paths, const RankRoot& root,
                     const std::vector<int>& gpus, const std::vector<sandbox::BindMount>& extra,
                     RankSpec& spec) const;

  // The cgroup name of a rank, removed when it has ended.
  static std::string CgroupName(const v1::StartAttempt& start, int rank);

 private:
  const RankSandboxOptions options_;
  const sandbox::Cgroups cgroups_;
  const sandbox::GpuNode gpu_node_;            // found once: not at each rank's start
  const absl::StatusOr<std::string> seccomp_;  // built once: sandbox/seccomp_filter.h
  std::vector<sandbox::RootEntry> host_root_;
};

}  // namespace tessera::worker
