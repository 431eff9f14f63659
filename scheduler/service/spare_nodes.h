#pragma once
// Hot spares: each pool (cluster, GPU type, GPUs per node) keeps SchedulerConfig::spares_per_pool
// idle nodes out of ordinary placement, so that a run resuming after a node fault finds a node
// at once, one that already has its image and has passed its pre-flight checks (ByteRobust's
// warm standbys). The leader's cycle calls Keep before it places:
//
//  - Choosing: the spares of a pool are the nodes that were spares and still may be (online,
//    schedulable, healthy, not suspected, holding no attempt but preemptible work), topped up with
//    idle nodes in name order; a pool with more drops its last ones. A spare a resumption took
//    holds an attempt, so the next cycle chooses another idle node. The choice is stored on the
//    node (Node.spare), so that a new leader keeps the same spares and people see them (mcli util,
//    the console).
//  - Warming: each spare is sent a WarmSpare with the images (and pinned digests) of its pool's
//    running runs, and sent again when that set changes, when its worker registers again, or
//    when no answer came within SchedulerConfig::spare_warm_timeout. Its answer becomes the
//    node's spare_status; a spare whose pre-flight checks failed is cordoned with them as
//    evidence, as a node that fails them before a run is.
//
// What placement does with them is SchedulingCycle::Place's: resumptions after a node fault
// (Run.requeued_after) are placed first on the spares and the nodes they ran on, stopping any
// preemptible work there; preemptible runs left waiting may use a spare's idle GPUs (the node
// stays a spare); everything else sees spares as unschedulable.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "scheduler/service/attempt_control.h"
#include "scheduler/service/runs_client.h"
#include "scheduler/service/scheduler_config.h"
#include "scheduler/service/worker_registry.h"
#include "services/store/node_store.h"
#include "tessera/v1/nodes.pb.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::scheduler {

// The nodes a spare may stand in for: a run's nodes are alike in all three.
using SparePool = std::tuple<std::string, std::string, int>;  // cluster, GPU type, GPUs per node

SparePool PoolOf(const v1::Node& node);

// Whether a queued run resumes after a node fault (and may take spares): its last attempt ended
// with a node lost or failing, a GPU fault, a hang, a straggler or failed pre-flight checks.
bool ResumesAfterNodeFault(const v1::Run& run);

// The spares each pool should have now: `per_pool` of the nodes that may be spares (online,
// schedulable, not in `busy` or `suspects`), those that are spares already first, then by name.
std::set<std::string> ChooseSpares(const std::vector<v1::Node>& nodes,
                                   const std::set<std::string>& busy,
                                   const std::set<std::string>& suspects, int per_pool);

// An image a spare should hold: the reference, the digest the run is pinned to, and whose run
// it is (for the owner's registry credentials).
struct SpareImage {
  std::string image;
  std::string digest;
  std::string run_id;
  bool operator<(const SpareImage& o) const {
    return std::tie(image, digest) < std::tie(o.image, o.digest);
  }
  bool operator==(const SpareImage& o) const { return image == o.image && digest == o.digest; }
};

// The images of each pool's running runs (`image: host` and runs without one excepted), by
// the pool of the nodes they run on.
std::map<SparePool, std::set<SpareImage>> PoolImages(const std::vector<v1::Run>& active,
                                                     const std::vector<v1::Node>& nodes);

class SpareNodes {
 public:
  SpareNodes(std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
             std::shared_ptr<WorkerRegistry> workers, std::shared_ptr<AttemptControl> control,
             std::shared_ptr<Clock> clock, SchedulerConfig config);

  bool enabled() const { return config_.spares_per_pool > 0; }

  // Once a cycle, before placement (see above). `nodes` is the cycle's copy, updated with what
  // this writes; `busy` the nodes holding a non-preemptible attempt or draining one, `suspects`
  // those that missed a beat. Returns whether it changed any node's spare (the placement index is
  // then built again). UNAVAILABLE when the store is away (the cycle tries again); a node another
  // writer changed meanwhile is left for the next cycle.
  absl::StatusOr<bool> Keep(std::vector<v1::Node>& nodes, const std::vector<v1::Run>& active,
                            const std::set<std::string>& busy,
                            const std::set<std::string>& suspects);

  // A worker's acknowledgement (any command): one answering a warm-up of ours is kept for the
  // next Keep. Called on the control streams' threads.
  void OnAck(const v1::CommandAck& ack);

 private:
  struct Warm {
    std::set<SpareImage> images;  // what was sent
    int64_t incarnation = 0;      // of the worker it was sent to
    std::string command_id;
    absl::Time sent_at;
  };
  struct Answer {
    bool ok = false;
    std::string error;
  };

  // Stores `spare` (and `status`) on the node when they differ from the copy; updates the copy.
  absl::Status Mark(v1::Node& node, bool spare, const std::string& status);
  // Sends `node` a warm-up when what it holds (or was sent) is not `images`.
  absl::Status WarmIfDue(const v1::Node& node, const std::set<SpareImage>& images,
                         const std::map<std::string, std::string>& drivers);
  // The answer to `node`'s last warm-up, if it came: its status, or a cordon.
  absl::Status Settle(v1::Node& node);

  const std::shared_ptr<store::NodeStore> nodes_;
  const std::shared_ptr<RunsClient> runs_;
  const std::shared_ptr<WorkerRegistry> workers_;
  const std::shared_ptr<AttemptControl> control_;
  const std::shared_ptr<Clock> clock_;
  const SchedulerConfig config_;

  std::map<std::string, Warm> sent_;  // by node; the cycle's thread only
  bool spares_changed_ = false;       // by this Keep
  absl::Mutex mu_;
  std::map<std::string, std::string> awaited_ ABSL_GUARDED_BY(mu_);  // command id -> node
  std::map<std::string, Answer> answers_ ABSL_GUARDED_BY(mu_);       // by command id
};

}  // namespace tessera::scheduler
