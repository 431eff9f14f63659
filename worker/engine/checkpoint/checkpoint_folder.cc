#include "worker/engine/checkpoint/checkpoint_folder.h"

#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/unique_fd.h"
#include "worker/engine/checkpoint/shard_file.h"

namespace tessera::engine {
namespace fs = std::filesystem;
namespace {

constexpr char kStepPrefix[] = "step-";

std::optional<int64_t> StepOf(const std::string& name) {
  if (!absl::StartsWith(name, kStepPrefix)) return std::nullopt;
  int64_t step = 0;
  if (!absl::SimpleAtoi(name.substr(sizeof(kStepPrefix) - 1), &step) || step < 0) {
    return std::nullopt;
  }
  return step;
}

constexpr char kOwnerFile[] = "owner";
constexpr char kOwnerLockFile[] = ".owner.lock";

// An exclusive flock on the folder's lock file, held while it lives.
class OwnerLock {
 public:
  static absl::StatusOr<OwnerLock> Take(const std::string& root) {
    const std::string path = root + "/" + kOwnerLockFile;
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (fd.get() < 0) return absl::UnavailableError(absl::StrCat(path, ": ", strerror(errno)));
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return absl::UnavailableError(absl::StrCat(path, ": ", strerror(errno)));
    }
    return OwnerLock(std::move(fd));
  }

 private:
  explicit OwnerLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing it releases the lock
};

// The owner file's run and attempt; nullopt when there is none.
absl::StatusOr<std::optional<FolderOwner>> ReadOwner(const std::string& root) {
  const std::string path = root + "/" + kOwnerFile;
  if (!fs::exists(path)) return std::optional<FolderOwner>();
  TESSERA_ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  const std::vector<std::string> parts =
      absl::StrSplit(absl::StripTrailingAsciiWhitespace(text), ' ');
  FolderOwner owner;
  if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &owner.attempt)) {
    return absl::DataLossError(absl::StrCat(path, ": expected \"RUN_ID ATTEMPT\", got \"",
                                            absl::StripTrailingAsciiWhitespace(text), "\""));
  }
  owner.run_id = parts[0];
  return std::optional<FolderOwner>(owner);
}

std::string Describe(const FolderOwner& o) {
  return absl::StrCat("attempt ", o.attempt, " of run ", o.run_id);
}

}  // namespace

absl::Status CheckpointFolder::Claim() const {
  if (!owner_) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(MakeFolders(root_));
  TESSERA_ASSIGN_OR_RETURN(const OwnerLock lock, OwnerLock::Take(root_));
  TESSERA_ASSIGN_OR_RETURN(const std::optional<FolderOwner> held, ReadOwner(root_));
  if (held && held->run_id == owner_->run_id && held->attempt > owner_->attempt) {
    return absl::FailedPreconditionError(absl::StrCat(root_, ": held by ", Describe(*held),
                                                      ", newer than this ", Describe(*owner_),
                                                      ", which may not write there"));
  }
  return WriteFileDurably(root_ + "/" + kOwnerFile,
                          absl::StrCat(owner_->run_id, " ", owner_->attempt, "\n"));
}

absl::Status CheckpointFolder::CheckOwnerLocked() const {
  if (!owner_) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(const std::optional<FolderOwner> held, ReadOwner(root_));
  if (held && (held->run_id != owner_->run_id || held->attempt != owner_->attempt)) {
    return absl::FailedPreconditionError(absl::StrCat(root_, " is now held by ", Describe(*held),
                                                      "; this ", Describe(*owner_),
                                                      " was superseded and commits nothing there"));
  }
  return absl::OkStatus();
}

std::string CheckpointFolder::StepFolder(int64_t step) const {
  return absl::StrFormat("%s/%s%08d", root_, kStepPrefix, step);
}

absl::Status CheckpointFolder::PrepareStep(int64_t step) const {
  return MakeFolders(StepFolder(step));
}

absl::Status CheckpointFolder::Commit(const CheckpointManifest& manifest) const {
  const std::string folder = StepFolder(manifest.step);
  TESSERA_RETURN_IF_ERROR(SyncFolder(folder));  // the shards' renames
  std::optional<OwnerLock> lock;
  if (owner_) {
    TESSERA_ASSIGN_OR_RETURN(lock, OwnerLock::Take(root_));
    TESSERA_RETURN_IF_ERROR(CheckOwnerLocked());
  }
  TESSERA_RETURN_IF_ERROR(
      WriteFileDurably(folder + "/" + kManifestFile, manifest.ToJson().dump(2) + "\n"));
  return WriteFileDurably(root_ + "/" + kLatestFile, fs::path(folder).filename().string() + "\n");
}

std::vector<int64_t> CheckpointFolder::CommittedSteps() const {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (auto it = fs::directory_iterator(root_, ec); !ec && it != fs::end(it); it.increment(ec)) {
    const auto step = StepOf(it->path().filename().string());
    if (step && fs::exists(it->path() / kManifestFile)) steps.push_back(*step);
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

absl::StatusOr<CheckpointManifest> CheckpointFolder::ReadManifest(int64_t step) const {
  const std::string path = StepFolder(step) + "/" + kManifestFile;
  TESSERA_ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded()) return absl::DataLossError(absl::StrCat(path, ": not valid JSON"));
  TESSERA_ASSIGN_OR_RETURN(CheckpointManifest m, CheckpointManifest::FromJson(json, path));
  if (m.step != step) {
    return absl::DataLossError(absl::StrCat(path, ": says step ", m.step, ", its folder ", step));
  }
  return m;
}

std::optional<CheckpointManifest> CheckpointFolder::LatestValid(
    const Compatible& compatible, std::vector<std::string>* refused) const {
  for (int64_t step : CommittedSteps()) {
    auto manifest = ReadManifest(step);
    absl::Status st = manifest.status();
    if (st.ok()) st = compatible(*manifest);
    if (st.ok()) st = ValidateShards(StepFolder(step), *manifest, /*hashes=*/true);
    if (st.ok()) return *std::move(manifest);
    if (refused) refused->push_back(absl::StrCat("step ", step, ": ", st.message()));
  }
  return std::nullopt;
}

absl::Status CheckpointFolder::Retain(int keep) const {
  std::optional<OwnerLock> lock;
  if (owner_) {
    TESSERA_ASSIGN_OR_RETURN(lock, OwnerLock::Take(root_));
    TESSERA_RETURN_IF_ERROR(CheckOwnerLocked());
  }
  const std::vector<int64_t> committed = CommittedSteps();
  std::error_code ec;
  if (keep > 0) {
    for (size_t i = static_cast<size_t>(keep); i < committed.size(); ++i) {
      fs::remove_all(StepFolder(committed[i]), ec);
      if (ec)
        return absl::UnavailableError(absl::StrCat(StepFolder(committed[i]), ": ", ec.message()));
    }
  }
  if (committed.empty()) return absl::OkStatus();
  for (auto it = fs::directory_iterator(root_, ec); !ec && it != fs::end(it); it.increment(ec)) {
    const auto step = StepOf(it->path().filename().string());
    if (step && *step < committed.front() && !fs::exists(it->path() / kManifestFile)) {
      std::error_code rm;
      fs::remove_all(it->path(), rm);
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::engine
