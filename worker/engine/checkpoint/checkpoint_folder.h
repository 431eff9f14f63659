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

class CheckpointFolder {
 public:
  explicit CheckpointFolder(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  std::string StepFolder(int64_t step) const;

  // Creates the step's folder for its shards.
  absl::Status PrepareStep(int64_t step) const;
  // Writes the manifest (the commit) and then points `latest` at the step.
  absl::Status Commit(const CheckpointManifest& manifest) const;

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
  std::string root_;
};

}  // namespace tessera::engine
