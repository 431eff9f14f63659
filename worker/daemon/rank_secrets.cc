#include "worker/daemon/rank_secrets.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

std::string SecretsDir(const AttemptPaths& paths) { return paths.dir + "/secrets"; }

// Written whole (base's durable writer), readable by its owner only, then given to the rank.
absl::Status WriteSecretFile(const std::string& path, const std::string& value,
                             const std::optional<RankIdentity>& identity) {
  if (auto st = WriteFileDurably(path, value, 0400); !st.ok()) return st;
  if (identity && ::chown(path.c_str(), identity->uid, identity->gid) != 0) {
    return absl::InternalError(absl::StrCat("cannot give ", path, " to the rank"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<sandbox::BindMount>> PlaceSecrets(
    const v1::StartAttempt& start, const AttemptPaths& paths,
    const std::optional<RankIdentity>& identity, bool sandboxed, std::vector<RankSpec>& specs) {
  std::vector<sandbox::BindMount> mounts;
  for (const auto& sv : start.secrets()) {
    const v1::Secret& s = sv.secret();
    switch (s.type()) {
      case v1::SECRET_TYPE_ENVIRONMENT:
        for (auto& spec : specs) spec.env.emplace(s.env_key(), sv.value());
        break;
      case v1::SECRET_TYPE_MOUNTED:
      case v1::SECRET_TYPE_SSH:
      case v1::SECRET_TYPE_GIT_SSH: {
        if (!sandboxed) {
          return absl::FailedPreconditionError(absl::StrCat(
              "secret ", s.name(), " is a file to mount at ", s.mount_path(),
              ", and this node runs ranks without a sandbox (tessera-worker --sandbox off)"));
        }
        std::error_code ec;
        fs::create_directories(SecretsDir(paths), ec);
        fs::permissions(SecretsDir(paths), fs::perms::owner_all, ec);
        if (identity && ::chown(SecretsDir(paths).c_str(), identity->uid, identity->gid) != 0) {
          return absl::InternalError(
              absl::StrCat("cannot give ", SecretsDir(paths), " to the rank"));
        }
        const std::string file = absl::StrCat(SecretsDir(paths), "/", s.name());
        if (auto st = WriteSecretFile(file, sv.value(), identity); !st.ok()) return st;
        mounts.push_back({file, s.mount_path(), false, false});
        if (s.type() == v1::SECRET_TYPE_GIT_SSH) {
          // Git integrations (and the run's own git) clone with the key, without a prompt.
          for (auto& spec : specs) {
            spec.env.emplace(
                "GIT_SSH_COMMAND",
                absl::StrCat("ssh -i ", s.mount_path(),
                             " -o IdentitiesOnly=yes -o StrictHostKeyChecking=accept-new"));
          }
        }
        break;
      }
      default:
        break;  // registry credentials are for the pull, not the ranks
    }
  }
  return mounts;
}

const v1::SecretValue* RegistrySecretFor(const v1::StartAttempt& start,
                                         const std::string& registry) {
  for (const auto& sv : start.secrets()) {
    if (sv.secret().type() == v1::SECRET_TYPE_DOCKER_REGISTRY && sv.secret().server() == registry) {
      return &sv;
    }
  }
  return nullptr;
}

absl::Status WriteRegistryAuth(const std::string& path, const v1::SecretValue& secret) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string auth =
      absl::Base64Escape(absl::StrCat(secret.secret().username(), ":", secret.value()));
  const std::string json =
      absl::StrCat("{\"auths\":{\"", secret.secret().server(), "\":{\"auth\":\"", auth, "\"}}}\n");
  return WriteSecretFile(path, json, std::nullopt);
}

void RemoveSecretFiles(const AttemptPaths& paths) {
  std::error_code ec;
  fs::remove_all(SecretsDir(paths), ec);
}

}  // namespace tessera::worker
