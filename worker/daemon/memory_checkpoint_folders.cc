#include "worker/daemon/memory_checkpoint_folders.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

// A run's id as a folder name: what the control plane makes (a UUID) passes, anything that
// could leave the root does not.
bool RunIdIsFolderName(const std::string& name) {
  return !name.empty() && name.size() <= 128 && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
         });
}

struct RunFolderUse {
  fs::path path;
  int64_t bytes = 0;
  absl::Time last_write = absl::InfinitePast();
};

RunFolderUse MeasureRunFolder(const fs::path& folder) {
  RunFolderUse use{folder};
  struct stat st {};
  if (::stat(folder.c_str(), &st) == 0) use.last_write = absl::TimeFromTimespec(st.st_mtim);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    use.last_write = std::max(use.last_write, absl::TimeFromTimespec(st.st_mtim));
    if (S_ISREG(st.st_mode)) use.bytes += static_cast<int64_t>(st.st_size);
  }
  return use;
}

}  // namespace

absl::StatusOr<std::optional<RunMemoryFolder>> MemoryCheckpointFolders::Prepare(
    const std::string& run_id, const std::optional<RankIdentity>& identity) const {
  if (settings_.root.empty() || settings_.bytes <= 0) return std::nullopt;
  if (!RunIdIsFolderName(run_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("run id \"", run_id, "\" cannot name a memory checkpoint folder"));
  }
  std::error_code ec;
  fs::create_directories(settings_.root, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("creating ", settings_.root, ": ", ec.message()));
  }
  const fs::path mine = fs::path(settings_.root) / run_id;
  const absl::Time now = clock_->Now();
  std::vector<RunFolderUse> others;
  for (const auto& entry : fs::directory_iterator(settings_.root, ec)) {
    if (entry.path() == mine || !entry.is_directory()) continue;
    RunFolderUse use = MeasureRunFolder(entry.path());
    if (now - use.last_write > settings_.idle_limit) {
      spdlog::info("memory checkpoints of run {} removed: nothing written for {}",
                   use.path.filename().string(), absl::FormatDuration(now - use.last_write));
      fs::remove_all(use.path, ec);
      continue;
    }
    others.push_back(std::move(use));
  }
  // The bound holds for all runs, and a run starting here is owed an equal share of it: while
  // the others leave less, the longest idle of them go.
  std::sort(others.begin(), others.end(), [](const RunFolderUse& a, const RunFolderUse& b) {
    return a.last_write < b.last_write;
  });
  const int64_t share = settings_.bytes / static_cast<int64_t>(others.size() + 1);
  int64_t others_bytes = 0;
  for (const auto& o : others) others_bytes += o.bytes;
  for (const auto& o : others) {
    if (settings_.bytes - others_bytes >= share) break;
    spdlog::info("memory checkpoints of run {} removed to make room for run {} ({} bytes)",
                 o.path.filename().string(), run_id, o.bytes);
    fs::remove_all(o.path, ec);
    others_bytes -= o.bytes;
  }
  const int64_t left = settings_.bytes - others_bytes;
  if (left <= 0) {
    spdlog::warn("no room for run {}'s memory checkpoints: other runs hold {} of {} bytes", run_id,
                 others_bytes, settings_.bytes);
    return std::nullopt;
  }
  fs::create_directories(mine, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", mine.string(), ": ", ec.message()));
  // Only the run's ranks read and write its folder.
  fs::permissions(mine, fs::perms::owner_all, ec);
  if (auto st = GiveToRank(mine.string(), identity); !st.ok()) return st;
  return RunMemoryFolder{mine.string(), left};
}

void MemoryCheckpointFolders::Release(const std::string& run_id) const {
  if (settings_.root.empty() || !RunIdIsFolderName(run_id)) return;
  const fs::path folder = fs::path(settings_.root) / run_id;
  std::error_code ec;
  if (fs::remove_all(folder, ec) > 0) {
    spdlog::info("memory checkpoints of run {} removed: it finished training here", run_id);
  }
}

}  // namespace tessera::worker
