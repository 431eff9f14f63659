#pragma once
// A run's save_folder: one sub-folder per step (step-00000050/), each committed by its
// manifest.json, and a `latest` file naming the newest committed step. Loading takes the newest
// committed step whose shards are all there and intact; one with a missing, truncated or
// corrupt shard is refused (with the reason) and the one before it is used.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/checkpoint/manifest.h"

namespace tessera::engine {

// The attempt that may commit into a folder. When a node is declared lost before its worker's
// fence lease ends (the loss lease is shorter), the lost attempt's ranks there may run on for a
// few seconds beside their successor: the successor's rank 0 claims the folder before it loads,
// and from then on the older attempt's rank 0 commits nothing (and deletes nothing) there.
struct FolderOwner {
  std::string run_id;   // RUN_ID
  int64_t attempt = 0;  // RESUMPTION_INDEX
};

class CheckpointFolder {
 public:
  // Without an owner (a rank run by hand) no claim is made or checked.
  explicit CheckpointFolder(std::string root, std::optional<FolderOwner> owner = std::nullopt)
      : root_(std::move(root)), owner_(std::move(owner)) {}
  const std::string& root() const { return root_; }
  std::string StepFolder(int64_t step) const;

  // Creates the step's folder for its shards.
  absl::Status PrepareStep(int64_t step) const;
  // Writes the manifest (the commit) and then points `latest` at the step. FAILED_PRECONDITION,
  // writing nothing, when another attempt has claimed the folder since this one did.
  absl::Status Commit(const CheckpointManifest& manifest) const;
  // Makes the owner the folder's (an `owner` file, changed under an flock that Commit also
  // takes, so no commit of the attempt before lands after the claim). FAILED_PRECONDITION when
  // a newer attempt of the same run holds it; another run's claim is replaced (a run that
  // resumes from another's folder).
  absl::Status Claim() const;

  // Steps with a manifest, newest first.
  std::vector<int64_t> CommittedSteps() const;
  absl::StatusOr<CheckpointManifest> ReadManifest(int64_t step) const;

  // The newest committed checkpoint that `compatible` accepts and whose shards validate
  // (with their hashes); nullopt when there is none. Each refused one is described in `refused`.
  using Compatible = std::function<absl::Status(const CheckpointManifest&)>;
  std::optional<CheckpointManifest> LatestValid(const Compatible& compatible,
                                                std::vector<std::string>* refused) const;

  // Deletes committed steps beyond the newest `keep` (0 keeps all) and step folders that never
  // committed and are older than the newest committed one (saves cut short by a crash).
  absl::Status Retain(int keep) const;

 private:
  // OK when the owner file names this folder's owner (or there is no owner to check); call with
  // the claim lock held.
  absl::Status CheckOwnerLocked() const;

  std::string root_;
  std::optional<FolderOwner> owner_;
};

}  // namespace tessera::engine
