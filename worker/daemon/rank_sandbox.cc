#include "worker/daemon/rank_sandbox.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/byte_size.h"
#include "worker/sandbox/seccomp_filter.h"

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

// A variable that names a bound host path (or a path under it) names it where it is inside.
void RewriteHostPaths(const std::vector<sandbox::BindMount>& mounts,
                      std::map<std::string, std::string>& env) {
  for (auto& [key, value] : env) {
    for (const auto& m : mounts) {
      if (m.source == m.target) continue;
      if (value == m.source) {
        value = m.target;
        break;
      }
      if (absl::StartsWith(value, m.source + "/")) {
        value = m.target + value.substr(m.source.size());
        break;
      }
    }
  }
}

}  // namespace

RankSandbox::RankSandbox(RankSandboxOptions options)
    : options_(std::move(options)),
      cgroups_(sandbox::Cgroups::Detect()),
      gpu_node_(sandbox::GpuNode::Discover(options_.gpu)),
      seccomp_(sandbox::RankSeccompProgram()) {
  auto entries = sandbox::ListRootEntries("/");
  if (entries.ok()) host_root_ = std::move(*entries);
}

absl::Status RankSandbox::Check() const {
  if (::access(options_.bwrap.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--sandbox bwrap: ", options_.bwrap,
                     " cannot be run (install Debian's bubblewrap, or --sandbox off)"));
  }
  if (::access(options_.init_path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--sandbox bwrap: the sandbox's init ", options_.init_path,
                     " is missing (it is built beside tessera-worker)"));
  }
  if (host_root_.empty()) return absl::FailedPreconditionError("cannot list the host's root");
  if (!seccomp_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--sandbox bwrap: the ranks' seccomp filter cannot be built: ",
                     seccomp_.status().message()));
  }
  return absl::OkStatus();
}

std::string RankSandbox::LimitSource() const {
  return options_.memory_by_node_share ? "a rank's share of the node's memory"
                                       : "the node's --rank-memory-limit";
}

std::optional<std::string> RankSandbox::OutOfMemoryNote(const v1::StartAttempt& start,
                                                        int rank) const {
  if (options_.limits.memory_bytes <= 0) return std::nullopt;
  const int64_t kills = cgroups_.OomKills(CgroupName(start, rank));
  if (kills <= 0) return std::nullopt;
  if (LaunchesPerNode(start)) {
    const int ranks = std::max(1, start.local_world_size());
    return absl::StrCat("[tessera] a process of node rank ", start.node_rank(),
                        " was killed by the kernel: out of memory at the node container's limit "
                        "of ",
                        FormatByteSize(options_.limits.memory_bytes * ranks), " (", ranks,
                        " ranks × ", LimitSource(), ")\n");
  }
  return absl::StrCat("[tessera] rank ", rank,
                      " was killed by the kernel: out of memory at its limit of ",
                      FormatByteSize(options_.limits.memory_bytes), " (", LimitSource(), ")\n");
}

std::string RankSandbox::CgroupName(const v1::StartAttempt& start, int rank) {
  return absl::StrCat(start.run_id(), "-", start.resumption_index(), "-rank-", rank);
}

absl::Status RankSandbox::Apply(const v1::StartAttempt& start, const AttemptPaths& paths,
                                const RankRoot& root, const std::vector<int>& gpus,
                                const std::vector<sandbox::BindMount>& extra,
                                RankSpec& spec) const {
  // A node container holds every local rank of the run: its shares of the node are theirs added.
  const int ranks = LaunchesPerNode(start) ? std::max(1, start.local_world_size()) : 1;
  sandbox::SandboxSpec s;
  s.bwrap = options_.bwrap;
  s.init_path = options_.init_path;
  s.root = root.rootfs;
  if (root.rootfs == "/") {
    s.root_entries = host_root_;
  } else {
    auto entries = sandbox::ListRootEntries(root.rootfs);
    if (!entries.ok()) return entries.status();
    s.root_entries = std::move(*entries);
  }
  const bool in_image = root.rootfs != "/";
  // What the rank reads (its parameters) and writes (its work and progress folders, shared
  // folders). On the host's root each stays at its host path, and the state folder around them
  // is covered. In an image the host's paths may lie under the image's read-only folders (where
  // no mount point can be made), so they go under /tessera, and the variables that name them
  // (PARAMETERS, TESSERA_PROGRESS_FILE, TESSERA_SHARED_DIR ...) are rewritten to match.
  std::vector<sandbox::BindMount> own = {
      {paths.parameters_path, paths.parameters_path, false, false},
      {paths.work_dir, paths.work_dir, true, false},
      {paths.progress_dir, paths.progress_dir, true, false}};
  for (const auto& dir : options_.shared_dirs) own.push_back({dir, dir, true, false});
  if (in_image) {
    own[0].target = std::string(kInImageRoot) + "/parameters.json";
    own[1].target = std::string(kInImageRoot) + "/work";
    own[2].target = std::string(kInImageRoot) + "/progress";
    for (size_t i = 3; i < own.size(); ++i) {
      own[i].target = absl::StrCat(kInImageRoot, "/shared-", i - 3);
    }
  } else {
    s.hidden.push_back(options_.state_dir);
  }
  own.insert(own.end(), extra.begin(), extra.end());  // at the targets the builder gave
  for (const auto& m : own) s.mounts.push_back(m);
  if (LaunchesPerNode(start)) {
    // mcli's place for the parameters. A root whose /mnt is a folder has it rebuilt so that
    // /mnt/config can be made; what else is in it stays, read-only.
    s.mounts.push_back({paths.parameters_yaml_path, kMcliParametersPath, false, false});
    for (const auto& e : s.root_entries) {
      if (e.name != "mnt" || e.kind != sandbox::RootEntry::Kind::kDirectory) continue;
      auto inner = sandbox::ListRootEntries(fs::path(root.rootfs) / "mnt");
      if (!inner.ok()) return inner.status();
      std::erase_if(*inner, [](const sandbox::RootEntry& x) { return x.name == "config"; });
      s.opened_entries["mnt"] = std::move(*inner);
    }
  }
  if (in_image) RewriteHostPaths(own, spec.env);
  const sandbox::GpuAccess gpu =
      sandbox::PlanGpuAccess(gpu_node_, gpus, in_image, start.num_nodes() > 1);
  for (const auto& m : gpu.mounts) s.mounts.push_back(m);
  s.shm_bytes = options_.shm_bytes * ranks;
  s.tmp_bytes = options_.tmp_bytes * ranks;
  s.uid = spec.identity ? spec.identity->uid : ::geteuid();
  s.gid = spec.identity ? spec.identity->gid : ::getegid();
  s.hostname = "";  // the node's own: NCCL and torch's rendezvous read it
  s.working_dir = own[1].target;
  // The image's variables under the run's own and Tessera's (emplace keeps those).
  for (const auto& kv : root.env) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (!p.first.empty()) spec.env.emplace(p.first, p.second);
  }
  if (in_image) spec.env.emplace("PATH", sandbox::kDefaultPath);
  sandbox::ApplyGpuEnvironment(gpu, sandbox::kDefaultPath, spec.env);
  spec.env["HOME"] = own[1].target;
  auto options = sandbox::BwrapOptions(s);
  if (!options.ok()) return options.status();
  spec.sandbox_program = s.bwrap;
  spec.sandbox_options = std::move(*options);
  if (!seccomp_.ok()) return seccomp_.status();
  spec.sandbox_seccomp = *seccomp_;
  if (options_.limits.any() && cgroups_.available()) {
    sandbox::ResourceLimits limits = options_.limits;
    limits.memory_bytes *= ranks;
    limits.cpus *= ranks;
    limits.processes *= ranks;
    auto procs = cgroups_.Create(CgroupName(start, spec.rank), limits);
    if (!procs.ok()) return procs.status();
    spec.cgroup_procs = std::move(*procs);
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker
