#include "worker/daemon/attempt_folders.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

// A user's name as a folder name: kept when it is a plain name, else replaced by its uid.
std::string UserFolderName(const v1::StartAttempt& start) {
  const std::string& user = start.user();
  const bool plain = !user.empty() && user.size() <= 64 && user != "." && user != ".." &&
                     std::all_of(user.begin(), user.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                              c == '-' || c == '@';
                     });
  return plain ? user : absl::StrCat("uid-", start.user_uid());
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("writing ", path));
  return absl::OkStatus();
}

}  // namespace

absl::Status PrepareAttemptFolders(const v1::StartAttempt& start, const AttemptPaths& paths,
                                   const std::optional<RankIdentity>& identity) {
  std::error_code ec;
  for (const auto& dir : {paths.work_dir, paths.logs_dir, paths.progress_dir}) {
    fs::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("creating ", dir, ": ", ec.message()));
  }
  if (identity) {
    // The state folder and runs/ were opened so at the worker's start.
    for (const auto& dir : {fs::path(paths.dir).parent_path().string(), paths.dir}) {
      if (auto st = LetRankPass(dir); !st.ok()) return st;
    }
    fs::permissions(paths.logs_dir, fs::perms::owner_all, ec);
    if (ec) return absl::InternalError(absl::StrCat("chmod ", paths.logs_dir, ": ", ec.message()));
    for (const auto& dir : {paths.work_dir, paths.progress_dir}) {
      if (auto st = GiveToRank(dir, identity); !st.ok()) return st;
    }
  }
  // For a restarted worker's log shipper, which finds spool files by walking the folders.
  if (auto st = WriteFile(paths.dir + "/node_rank", std::to_string(start.node_rank())); !st.ok()) {
    return st;
  }
  const std::string& parameters = start.parameters_json().empty() ? "{}" : start.parameters_json();
  if (auto st = WriteFile(paths.parameters_path, parameters); !st.ok()) return st;
  if (!LaunchesPerNode(start)) return absl::OkStatus();
  auto yaml = ParametersAsYaml(parameters);
  if (!yaml.ok()) return yaml.status();
  return WriteFile(paths.parameters_yaml_path, *yaml);
}

absl::StatusOr<std::string> PrepareUserSharedFolder(const std::string& shared_dir,
                                                    const v1::StartAttempt& start,
                                                    const std::optional<RankIdentity>& identity) {
  const std::string folder = absl::StrCat(shared_dir, "/", UserFolderName(start));
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", folder, ": ", ec.message()));
  if (auto st = GiveToRank(folder, identity); !st.ok()) return st;
  return folder;
}

}  // namespace tessera::worker
