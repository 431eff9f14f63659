#include "worker/daemon/state_gc.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "worker/logship/spool_reader.h"

namespace tessera::worker {
namespace fs = std::filesystem;

namespace {

absl::Time ModifiedAt(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return absl::InfinitePast();
  return absl::TimeFromTimespec(st.st_mtim);
}

// True when the attempt folder may go: every spool file is shipped, nothing changed recently.
bool Collectable(const fs::path& attempt, absl::Duration retention, absl::Time now) {
  std::error_code ec;
  absl::Time newest = absl::InfinitePast();
  for (const auto& entry : fs::recursive_directory_iterator(attempt, ec)) {
    newest = std::max(newest, ModifiedAt(entry.path()));
    const std::string ext = entry.path().extension().string();
    if ((ext == ".stdout" || ext == ".stderr") && !LoadAckState(entry.path().string()).done) {
      return false;
    }
  }
  return !ec && now - newest >= retention;
}

}  // namespace

int CollectFinishedAttempts(const std::string& state_dir,
                            const std::set<std::pair<std::string, int>>& active,
                            absl::Duration retention, absl::Time now) {
  int removed = 0;
  std::error_code ec;
  const fs::path runs = fs::path(state_dir) / "runs";
  if (!fs::exists(runs, ec)) return 0;
  for (const auto& run : fs::directory_iterator(runs, ec)) {
    const std::string run_id = run.path().filename().string();
    for (const auto& attempt : fs::directory_iterator(run.path(), ec)) {
      const std::string name = attempt.path().filename().string();
      int resumption = 0;
      if (!absl::StartsWith(name, "attempt-") || !absl::SimpleAtoi(name.substr(8), &resumption)) {
        continue;
      }
      if (active.count({run_id, resumption}) || !Collectable(attempt.path(), retention, now)) {
        continue;
      }
      std::error_code rm;
      fs::remove_all(attempt.path(), rm);
      if (rm) {
        spdlog::warn("could not remove {}: {}", attempt.path().string(), rm.message());
        continue;
      }
      ++removed;
    }
    if (fs::is_empty(run.path(), ec)) fs::remove(run.path(), ec);
  }
  return removed;
}

}  // namespace tessera::worker
