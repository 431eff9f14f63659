#pragma once
// tessera-worker's flags for the rank sandbox and the image cache, and how they become the
// worker's options (kept apart from main.cc, which has the control plane's flags).

#include "base/cli_app_fwd.h"
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/image/pull_guard.h"

namespace tessera::worker {

struct SandboxFlags {
  std::string mode = "bwrap";
  std::string bwrap = "/usr/bin/bwrap";
  std::string init_path;        // default: beside tessera-worker
  std::string image_cache_dir;  // default: STATE/images
  std::string image_cache_size = "50GiB";
  int64_t image_max_files = image::PullLimits{}.max_files;
  std::string image_min_free_disk = "1GiB";
  int64_t image_min_free_inodes = image::PullLimits{}.min_free_inodes;
  std::string default_registry = "docker.io";
  std::vector<std::string> insecure_registries;
  std::string registry_auth_file;
  std::string registry_certs_dir = "/etc/containers/certs.d";
  bool pull_with_skopeo = false;
  std::string gpu_device_dir = "/dev";
  bool gpu_profiling = false;
  std::string shm_size = "8GiB";
  std::string rank_memory_limit = "auto";
  std::string tmp_size = "4GiB";
  double rank_cpu_limit = 0;
  // Processes and threads per rank: a fork bomb stops at its run's share, not the node's.
  int64_t rank_process_limit = 4096;
  std::string shared_dir;
  std::string memory_checkpoint_dir = "/dev/shm/tessera-memory-checkpoints";
  std::string memory_checkpoint_bytes = "4GiB";
};

void AddSandboxFlags(CLI::App& app, SandboxFlags& flags);

// Fills o.sandbox, o.images, o.per_user_uids, o.shared_dir and o.memory_checkpoints; `rank_user` is
// --rank-user as given. One error naming the flag that is wrong.
absl::Status ApplySandboxFlags(const SandboxFlags& flags, const std::string& rank_user,
                               WorkerOptions& o);

}  // namespace tessera::worker
