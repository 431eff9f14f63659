#include "worker/daemon/rank_spec_builder.h"

#include "absl/strings/str_cat.h"
#include "worker/daemon/attempt_folders.h"
#include "worker/daemon/rank_secrets.h"

namespace tessera::worker {

std::optional<RankIdentity> RankSpecBuilder::IdentityFor(const v1::StartAttempt& start) const {
  if (settings_.per_user_uids && start.user_uid() > 0) {
    const auto id = static_cast<uid_t>(start.user_uid());
    return RankIdentity{start.user(), id, static_cast<gid_t>(id)};
  }
  return settings_.rank_identity;
}

absl::StatusOr<std::vector<RankSpec>> RankSpecBuilder::Build(
    const v1::StartAttempt& start, const AttemptPaths& paths, const RankRoot& root,
    const std::optional<RankIdentity>& identity) const {
  auto specs = BuildRankSpecs(start, paths, settings_.simulated_gpus);
  if (!specs.ok()) return specs.status();
  for (auto& spec : *specs) {
    for (const auto& [k, v] : settings_.rank_env) spec.env.emplace(k, v);
  }
  // The GPU's model, for engines that compute MFU from the device's peak.
  if (!settings_.gpu_model.empty() && start.gpu_indices_size() > 0) {
    for (auto& spec : *specs) spec.env.emplace("TESSERA_GPU_NAME", settings_.gpu_model);
  }
  std::string user_shared;
  if (!settings_.shared_dir.empty()) {
    auto folder = PrepareUserSharedFolder(settings_.shared_dir, start, identity);
    if (!folder.ok()) return folder.status();
    user_shared = *folder;
    for (auto& spec : *specs) spec.env["TESSERA_SHARED_DIR"] = user_shared;
  }
  std::optional<RunMemoryFolder> memory;
  if (settings_.memory_checkpoints) {
    auto folder = settings_.memory_checkpoints->Prepare(start.run_id(), identity);
    if (!folder.ok()) return folder.status();
    memory = *folder;
  }
  if (memory) {
    for (auto& spec : *specs) {
      spec.env["TESSERA_MEMORY_CHECKPOINT_DIR"] = memory->path;
      spec.env["TESSERA_MEMORY_CHECKPOINT_BYTES"] = absl::StrCat(memory->bytes);
    }
  }
  for (auto& spec : *specs) {
    spec.identity = identity;
    spec.nice = settings_.rank_nice;
    if (identity) {
      spec.env.emplace("HOME", paths.work_dir);
      spec.env.emplace("USER", identity->name);
      spec.env.emplace("LOGNAME", identity->name);
    }
  }
  if (auto st = PrepareAttemptFolders(start, paths, identity); !st.ok()) return st;
  auto secret_mounts = PlaceSecrets(start, paths, identity, settings_.sandbox != nullptr, *specs);
  if (!secret_mounts.ok()) return secret_mounts.status();
  if (settings_.sandbox) {
    // Each writable folder at its host path on the host's root; in an image under /tessera (the
    // sandbox rewrites the variables that name it to match). Secrets go where their owner said.
    const auto folder_bind = [in_image = root.rootfs != "/"](const std::string& host_path,
                                                             const std::string& in_image_name) {
      return sandbox::BindMount{
          host_path, in_image ? absl::StrCat(kInImageRoot, "/", in_image_name) : host_path, true,
          false};
    };
    std::vector<sandbox::BindMount> extra = *secret_mounts;
    if (!user_shared.empty()) extra.push_back(folder_bind(user_shared, "user-shared"));
    if (memory) extra.push_back(folder_bind(memory->path, "memory-checkpoints"));
    for (auto& spec : *specs) {
      std::vector<int> gpus;
      if (LaunchesPerNode(start)) {
        gpus.assign(start.gpu_indices().begin(), start.gpu_indices().end());
      } else if (start.gpu_indices_size() > spec.local_rank) {
        gpus.push_back(start.gpu_indices(spec.local_rank));
      }
      if (auto st = settings_.sandbox->Apply(start, paths, root, gpus, extra, spec); !st.ok()) {
        return st;
      }
    }
  }
  return specs;
}

}  // namespace tessera::worker
