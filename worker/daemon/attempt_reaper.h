// The exit side of the worker's attempts, one role of AttemptManager's: reaps the ranks of an
// attempt that exited since the last look and says so as the control plane hears it (RankExit,
// an out-of-memory kill noted at the end of the rank's stderr, the exit metrics), and gathers
// what an attempt that ended leaves to release. Called under AttemptManager's lock; what it
// gathers is released outside it (images, cgroups, walls and memory folders have locks and
// tools of their own).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/v1/worker.pb.h"
#include "worker/common/rank_output.h"
#include "worker/daemon/attempt_state.h"
#include "worker/daemon/rank_sandbox.h"

namespace tessera::worker {

class AttemptReaper {
 public:
  // `sandbox`: the ranks' sandbox (it knows out-of-memory kills and cgroups); null: none.
  AttemptReaper(std::string node_name, std::shared_ptr<const RankSandbox> sandbox);

  struct Reaped {
    // RANK_EXITED with the ranks that exited now, or FINISHED once all have; none when nothing
    // changed.
    std::optional<v1::AttemptUpdate> update;
    std::vector<RankOutput> done;  // the output of each rank that exited now
    bool ended = false;            // every rank has exited (or it has none)
    // Once ended, every rank's output: what its FINISHED waits to see shipped.
    std::vector<RankOutput> outputs;
  };
  // Reaps the launched attempt `a`'s ranks that exited since the last call (each reported once).
  Reaped Reap(AttemptState& a) const;

  // What ended attempts leave to release.
  struct Leftovers {
    std::vector<std::string> image_digests;
    std::vector<std::string> cgroups;
    std::vector<std::pair<int, uid_t>> rendezvous_walls;  // (port, owner)
    // Runs whose ranks here all exited 0, neither stopped nor fenced: trained to their end, so
    // their in-memory checkpoints have nothing left to resume.
    std::vector<std::string> trained_runs;
  };
  void Gather(const AttemptState& ended, Leftovers& into) const;

 private:
  const std::string node_name_;
  const std::shared_ptr<const RankSandbox> sandbox_;
};

}  // namespace tessera::worker
