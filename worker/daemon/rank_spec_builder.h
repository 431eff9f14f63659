#pragma once
// Builds each rank's spec for an attempt on this node: the run contract's variables
// (rank_environment.h) with the node's own (--rank-env, the GPU model, the user's shared folder),
// who the rank runs as and at what nice value, the attempt's folders and secrets placed, and its
// sandbox in the run's root. AttemptManager launches what it builds.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/memory_checkpoint_folders.h"
#include "worker/daemon/rank_environment.h"
#include "worker/daemon/rank_identity.h"
#include "worker/daemon/rank_launcher.h"
#include "worker/daemon/rank_sandbox.h"

namespace tessera::worker {

// The node's side of every rank's spec (AttemptManagerOptions' fields of the same names).
struct RankSpecSettings {
  bool simulated_gpus = false;
  std::string gpu_model;                        // TESSERA_GPU_NAME where GPUs are given
  std::map<std::string, std::string> rank_env;  // a run's own variables win
  std::string shared_dir;                       // empty: no shared folder
  // The node's memory for in-memory checkpoints; null: none.
  std::shared_ptr<const MemoryCheckpointFolders> memory_checkpoints;
  int rank_nice = 0;
  std::shared_ptr<const RankSandbox> sandbox;  // null: ranks run on the node itself
  // Who ranks run as (worker --rank-user); nullopt: the worker's own user.
  std::optional<RankIdentity> rank_identity;
  // Each user's ranks run as the uid the control plane gave that user (a root worker without
  // --rank-user); rank_identity is then for runs that came without one.
  bool per_user_uids = false;
};

class RankSpecBuilder {
 public:
  explicit RankSpecBuilder(RankSpecSettings settings) : settings_(std::move(settings)) {}

  // The specs of the attempt's ranks (or of its node launcher), run as `identity` in `root`,
  // with the attempt's folders made and its secrets placed. An error is the node's, not the
  // run's.
  // Who the attempt's ranks run as.
  std::optional<RankIdentity> IdentityFor(const v1::StartAttempt& start) const;
  absl::StatusOr<std::vector<RankSpec>> Build(const v1::StartAttempt& start,
                                              const AttemptPaths& paths, const RankRoot& root,
                                              const std::optional<RankIdentity>& identity) const;

 private:
  const RankSpecSettings settings_;
};

}  // namespace tessera::worker
