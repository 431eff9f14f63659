#pragma once
// The node's memory for its runs' in-memory checkpoints (worker/engine/train/
// memory_checkpointer.h): a folder per run under --memory-checkpoint-dir (tmpfs: /dev/shm by
// default), given to the run's ranks' uid, bound into their sandboxes and named by
// TESSERA_MEMORY_CHECKPOINT_DIR, with the bytes it may hold in TESSERA_MEMORY_CHECKPOINT_BYTES.
// A run's folder outlives its attempts: what the node holds is what the run's next attempt
// resumes from after another node is lost; it goes when the run's ranks here all end with exit
// 0 (trained to the end). All runs' folders together stay within
// --memory-checkpoint-bytes, checked as each attempt starts: folders nobody wrote for
// `idle_limit` go first, then, while the others leave the starting run less than an equal share
// of the bound, the longest idle; the run may fill what is left.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "worker/daemon/rank_identity.h"

namespace tessera::worker {

struct MemoryCheckpointSettings {
  std::string root;   // empty: no in-memory checkpoints on this node
  int64_t bytes = 0;  // for all runs together
  absl::Duration idle_limit = absl::Hours(1);
};

struct RunMemoryFolder {
  std::string path;
  int64_t bytes = 0;  // what the run may keep there
};

class MemoryCheckpointFolders {
 public:
  MemoryCheckpointFolders(MemoryCheckpointSettings settings, std::shared_ptr<Clock> clock)
      : settings_(std::move(settings)), clock_(std::move(clock)) {}

  // The run's folder, made (or kept) and given to `identity`; nullopt where the node keeps none
  // or no byte is left for it (said in the log). An error is the node's (a folder not made).
  absl::StatusOr<std::optional<RunMemoryFolder>> Prepare(
      const std::string& run_id, const std::optional<RankIdentity>& identity) const;
  // Removes the run's folder: it trained to its end here, nothing left to resume.
  void Release(const std::string& run_id) const;

 private:
  MemoryCheckpointSettings settings_;
  std::shared_ptr<Clock> clock_;
};

}  // namespace tessera::worker
