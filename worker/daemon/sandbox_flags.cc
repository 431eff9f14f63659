#include "worker/daemon/sandbox_flags.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/byte_size.h"
#include "base/status_macros.h"
#include "worker/daemon/owned_children.h"

namespace tessera::worker {
namespace fs = std::filesystem;

void AddSandboxFlags(CLI::App& app, SandboxFlags& f) {
  app.add_option("--sandbox", f.mode,
                 "bwrap: every rank runs in its image (or the node's root, for image: host) in "
                 "an unprivileged bubblewrap sandbox; off: ranks run directly on the node and "
                 "image runs are refused (development only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bwrap", "off"}));
  app.add_option("--bwrap", f.bwrap, "the bubblewrap program")->capture_default_str();
  app.add_option("--sandbox-init", f.init_path,
                 "tessera-sandbox-init (default: next to tessera-worker)");
  app.add_option("--image-cache", f.image_cache_dir,
                 "where pulled images are kept, unpacked (default: STATE_DIR/images)");
  app.add_option("--image-cache-size", f.image_cache_size,
                 "the most the unpacked images may take; the least recently used unused ones "
                 "go first")
      ->capture_default_str();
  app.add_option("--image-max-files", f.image_max_files,
                 "the most files, folders and links one image may unpack to; more stops its pull")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--image-min-free-disk", f.image_min_free_disk,
                 "the free space the image cache's disk always keeps: a pull that would leave "
                 "less (as declared, or as it arrives) is stopped")
      ->capture_default_str();
  app.add_option("--image-min-free-inodes", f.image_min_free_inodes,
                 "the free inodes the image cache's disk always keeps, likewise")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--default-registry", f.default_registry,
                 "the registry of image names that name none (mosaicml/llm-foundry:...)")
      ->capture_default_str();
  app.add_option("--insecure-registry", f.insecure_registries,
                 "host:port of a registry whose TLS certificate is not checked, spoken to over "
                 "plain HTTP where it has no TLS (a local one); repeatable");
  app.add_option("--registry-auth-file", f.registry_auth_file,
                 "a containers auth.json with the credentials of private registries");
  app.add_option("--registry-certs-dir", f.registry_certs_dir,
                 "registries' own CA certificates, as HOST:PORT/*.crt below it (as skopeo and "
                 "podman read them)")
      ->capture_default_str();
  app.add_flag("--pull-with-skopeo", f.pull_with_skopeo,
               "pull every image with skopeo copy instead of over the registry's HTTP API "
               "(images with zstd or encrypted layers always are)");
  app.add_option("--gpu-device-dir", f.gpu_device_dir,
                 "where the GPUs' device nodes are (nvidia0, nvidiactl ...)")
      ->capture_default_str();
  app.add_flag("--gpu-profiling", f.gpu_profiling,
               "let runs profile their GPUs (binds /dev/nvidia-uvm-tools into their sandboxes)");
  app.add_option("--shm-size", f.shm_size,
                 "/dev/shm per rank: a node container's is this times its ranks (NCCL's "
                 "shared-memory transport lives there)")
      ->capture_default_str();
  app.add_option(
         "--rank-memory-limit", f.rank_memory_limit,
         "memory per rank, through cgroups where the node offers them: auto (the node's "
         "memory less a reserve for the system, shared by its GPUs), a size, or 0 (no limit); "
         "a node container's limit is this times its ranks")
      ->capture_default_str();
  app.add_option("--tmp-size", f.tmp_size,
                 "/tmp per rank, in memory and counted against the memory limit (0: the "
                 "kernel's default, half of the node's memory); a node container's is this "
                 "times its ranks")
      ->capture_default_str();
  app.add_option("--rank-cpu-limit", f.rank_cpu_limit,
                 "cores per rank, through cgroups where the node offers them (0: no limit); a node "
                 "container's limit is this times its ranks")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 4096.0));
  app.add_option("--rank-process-limit", f.rank_process_limit,
                 "processes and threads per rank, through the pids cgroup where the node offers "
                 "it (0: no limit); a node container's limit is this times its ranks")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 22));
  app.add_option("--shared-dir", f.shared_dir,
                 "the cluster's shared folder (datasets, checkpoints): each user's ranks get "
                 "DIR/<user>, theirs alone, as TESSERA_SHARED_DIR");
  app.add_option("--memory-checkpoint-dir", f.memory_checkpoint_dir,
                 "a folder in memory (tmpfs) where runs keep in-memory checkpoints: their own "
                 "shards and their buddies' from other nodes (memory_checkpoint_interval)")
      ->capture_default_str();
  app.add_option("--memory-checkpoint-bytes", f.memory_checkpoint_bytes,
                 "what in-memory checkpoints may take in --memory-checkpoint-dir, all runs "
                 "together (0: none kept on this node)")
      ->capture_default_str();
}

namespace {

// Makes `dir` (flag `flag`'s absolute folder) one that users pass through to their own folder
// in, and none lists the others'.
absl::Status MakePassThroughRoot(const std::string& flag, const std::string& dir) {
  if (!fs::path(dir).is_absolute()) {
    return absl::InvalidArgumentError(flag + ": an absolute path, please");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", dir, ": ", ec.message()));
  fs::permissions(dir, fs::perms(0711), ec);
  return absl::OkStatus();
}

absl::Status ApplyMemoryCheckpointFlags(const SandboxFlags& f, WorkerOptions& o) {
  auto bytes = f.memory_checkpoint_bytes == "0" ? absl::StatusOr<int64_t>(0)
                                                : ParseByteSize(f.memory_checkpoint_bytes);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--memory-checkpoint-bytes: ", bytes.status().message()));
  }
  if (*bytes > 0) {
    TESSERA_RETURN_IF_ERROR(
        MakePassThroughRoot("--memory-checkpoint-dir", f.memory_checkpoint_dir));
    o.memory_checkpoints.root = f.memory_checkpoint_dir;
  }
  o.memory_checkpoints.bytes = *bytes;
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplySandboxFlags(const SandboxFlags& f, const std::string& rank_user,
                               WorkerOptions& o) {
  const bool root = ::geteuid() == 0;
  // A root worker without --rank-user runs each user's ranks as the uid the control plane gave
  // that user; runs without one (from before uids) run as nobody.
  if (root && rank_user.empty()) {
    if (f.mode == "off") {
      return absl::InvalidArgumentError(
          "--rank-user is required with --sandbox off when the worker runs as root");
    }
    o.per_user_uids = true;
    o.rank_identity = RankIdentity{"nobody", 65534, 65534};
  }
  if (!f.shared_dir.empty()) {
    TESSERA_RETURN_IF_ERROR(MakePassThroughRoot("--shared-dir", f.shared_dir));
    o.shared_dir = f.shared_dir;
  }
  TESSERA_RETURN_IF_ERROR(ApplyMemoryCheckpointFlags(f, o));
  if (f.mode == "off") {
    spdlog::warn("--sandbox off: ranks run directly on this node, and image runs are refused");
    return absl::OkStatus();
  }
  auto shm = ParseByteSize(f.shm_size);
  if (!shm.ok())
    return absl::InvalidArgumentError(absl::StrCat("--shm-size: ", shm.status().message()));
  // "0" is no limit (a size must be positive); "auto" is set once the worker knows its GPUs.
  const bool memory_share = f.rank_memory_limit == "auto";
  auto memory = f.rank_memory_limit == "0" || memory_share ? absl::StatusOr<int64_t>(0)
                                                           : ParseByteSize(f.rank_memory_limit);
  if (!memory.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank-memory-limit: ", memory.status().message()));
  }
  auto tmp = f.tmp_size == "0" ? absl::StatusOr<int64_t>(0) : ParseByteSize(f.tmp_size);
  if (!tmp.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--tmp-size: ", tmp.status().message()));
  }
  auto cache_size = ParseByteSize(f.image_cache_size);
  if (!cache_size.ok() || *cache_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--image-cache-size: ",
                     cache_size.ok() ? "must be positive" : cache_size.status().message()));
  }
  auto min_free_disk = f.image_min_free_disk == "0" ? absl::StatusOr<int64_t>(0)
                                                    : ParseByteSize(f.image_min_free_disk);
  if (!min_free_disk.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--image-min-free-disk: ", min_free_disk.status().message()));
  }
  RankSandboxOptions s;
  s.bwrap = f.bwrap;
  s.init_path =
      f.init_path.empty()
          ? (fs::canonical("/proc/self/exe").parent_path() / "tessera-sandbox-init").string()
          : f.init_path;
  s.state_dir = fs::absolute(o.state_dir).string();
  s.gpu.device_dir = f.gpu_device_dir;
  s.gpu.profiling = f.gpu_profiling;
  s.shm_bytes = *shm;
  s.limits = {.memory_bytes = *memory, .cpus = f.rank_cpu_limit, .processes = f.rank_process_limit};
  s.memory_by_node_share = memory_share;
  s.tmp_bytes = *tmp;
  // A shared folder the node gives every rank through --rank-env is bound too.
  if (auto it = o.rank_env.find("TESSERA_SHARED_DIR");
      it != o.rank_env.end() && o.shared_dir.empty()) {
    s.shared_dirs.push_back(it->second);
  }
  const int64_t process_limit = s.limits.processes;
  auto sandbox = std::make_shared<RankSandbox>(std::move(s));
  if (auto st = sandbox->Check(); !st.ok()) return st;
  if (sandbox->limits_wanted() && !sandbox->cgroups().available()) {
    spdlog::warn("rank limits cannot be enforced on this node: {}; ranks run without them",
                 sandbox->cgroups().why_not());
    o.labels["tessera.io/rank-limits"] = "unenforced";
  } else if (process_limit > 0 && !sandbox->cgroups().limits_processes()) {
    spdlog::warn(
        "--rank-process-limit cannot be enforced on this node (no pids cgroup "
        "controller): a fork bomb in a run can exhaust the node's processes");
    o.labels["tessera.io/rank-limits"] = "no-process-limit";
  }
  o.sandbox = sandbox;
  image::ImageCacheOptions c;
  c.dir = f.image_cache_dir.empty() ? o.state_dir + "/images" : f.image_cache_dir;
  c.max_bytes = *cache_size;
  c.max_files = f.image_max_files;
  c.min_free_bytes = *min_free_disk;
  c.min_free_inodes = f.image_min_free_inodes;
  c.default_registry = f.default_registry;
  c.insecure_registries = f.insecure_registries;
  c.auth_file = f.registry_auth_file;
  c.certs_dir = f.registry_certs_dir;
  c.pull_over_http = !f.pull_with_skopeo;
  o.images = std::make_shared<image::ImageCache>(
      c,
      // skopeo and umoci are this subreaper's children: their statuses must not be reaped away.
      std::make_shared<image::ProcessToolRunner>(
          image::ProcessToolRunner::ForkHooks{ForkOwnedChild, ReleaseOwnedChild}),
      SystemClock::Shared());
  return absl::OkStatus();
}

}  // namespace tessera::worker
