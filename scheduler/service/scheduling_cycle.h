#pragma once
// The leader's cycle: admit new runs to the queue, mark nodes whose lease expired as lost (ending
// their attempts as node failures), send stops for runs that are terminating, and place queued
// runs through the Placer, starting their ranks on the workers. Only the leader runs it
// (SchedulerRunner), one cycle at a time.

#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "scheduler/placement/placer.h"
#include "scheduler/service/attempt_control.h"
#include "scheduler/service/attempt_tracker.h"
#include "scheduler/service/cluster_metrics.h"
#include "scheduler/service/desired_attempts.h"
#include "scheduler/service/node_liveness.h"
#include "scheduler/service/placement_index.h"
#include "scheduler/service/rendezvous_ports.h"
#include "scheduler/service/run_resizing.h"
#include "scheduler/service/runs_client.h"
#include "scheduler/service/scheduler_config.h"
#include "scheduler/service/spare_nodes.h"
#include "scheduler/service/team_policy.h"
#include "scheduler/service/worker_registry.h"
#include "services/store/change_feed.h"
#include "services/store/node_store.h"

namespace tessera::scheduler {

struct CycleStats {
  int admitted = 0;
  int lost_nodes = 0;
  int placed = 0;
  int preempted = 0;
  int stops_sent = 0;
  int suspected_nodes = 0;  // missed a beat, not yet lost: nothing placed on them
  int resized = 0;          // runs on fewer nodes than they ask for, stopped to grow back
};

class SchedulingCycle {
 public:
  SchedulingCycle(std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
                  std::shared_ptr<WorkerRegistry> workers, std::shared_ptr<AttemptTracker> attempts,
                  std::shared_ptr<AttemptControl> control, std::shared_ptr<NodeLiveness> liveness,
                  std::shared_ptr<DesiredAttempts> desired, std::shared_ptr<Clock> clock,
                  SchedulerConfig config, std::shared_ptr<store::ChangeFeed> changes = nullptr,
                  std::shared_ptr<SchedulerMetrics> metrics = nullptr,
                  std::shared_ptr<TeamPolicy> teams = nullptr,
                  std::shared_ptr<SpareNodes> spares = nullptr);

  absl::StatusOr<CycleStats> RunCycle();
  // This instance begins a (new) term of leadership; called before the term's first cycle.
  void BeginTerm() {
    nodes_cached_ = false;
    liveness_->BeginTerm();
  }
  // This instance no longer leads: its cluster gauges go to zero (the new leader's count).
  void EndTerm() {
    if (metrics_) metrics_->Publish({});
  }

 private:
  // Queues PENDING runs, appending them (as the run manager returns them) to `queued`.
  absl::StatusOr<CycleStats> Cycle(bool nodes_cached);
  absl::Status AdmitPending(const std::vector<v1::Run>& pending, CycleStats& stats,
                            std::vector<v1::Run>& queued);
  // Ends the attempts of `active` runs on a node stored LOST (`nodes`), `just_lost` this
  // cycle's or an earlier one's, and appends the runs that went back to the queue to `queued`.
  absl::Status EndAttemptsOnLostNodes(const std::vector<v1::Node>& nodes,
                                      const std::vector<v1::Node>& just_lost,
                                      const std::vector<v1::Run>& active,
                                      std::vector<v1::Run>& queued);
  void SendStops(const std::vector<v1::Run>& active, CycleStats& stats);
  // `suspects`: nodes that missed a beat (NodeLiveness::Suspects), offered nothing.
  absl::Status Place(const std::vector<v1::Run>& queued, const std::vector<v1::Run>& active,
                     const std::vector<v1::Node>& nodes, std::set<std::string> suspects,
                     CycleStats& stats);
  // Records the placement of `run` on `attempt`'s nodes and starts its ranks there. `by_name`
  // is the cycle's node inventory by name; `drivers` each cluster's driver version; `ports`
  // the rendezvous ports in use on each node, to which the attempt's is added.
  // Stops the runs running on fewer nodes than they ask for that can now have all of them, right
  // after their next checkpoint (RunResizing::DueToGrow), as the placer left the cluster.
  void Grow(const std::vector<v1::Run>& active, const Placer& placer, CycleStats& stats);
  // Tells the victims of this cycle's preemptions to stop, each with the reason its user reads.
  void StopVictims(const PlacementDecision& for_resumptions, const PlacementDecision& ordinary,
                   const std::vector<v1::Run>& active,
                   const std::map<std::string, const v1::Run*>& queued_by_id, CycleStats& stats);
  // Starts the placements that need no run to leave first: `resumed` (runs resuming after a
  // node fault, which name the spares they took), then those of `others`.
  absl::Status StartPlacements(const std::vector<const Placement*>& resumed,
                               std::initializer_list<const PlacementDecision*> others,
                               const std::map<std::string, const v1::Run*>& queued_by_id,
                               const std::vector<v1::Node>& nodes, RendezvousPorts& ports,
                               CycleStats& stats);
  absl::Status Start(const v1::Run& run, v1::Attempt attempt,
                     const std::map<std::string, const v1::Node*>& by_name,
                     const std::map<std::string, std::string>& drivers, RendezvousPorts& ports,
                     CycleStats& stats);

  std::shared_ptr<store::NodeStore> nodes_;
  std::shared_ptr<RunsClient> runs_;
  std::shared_ptr<WorkerRegistry> workers_;
  std::shared_ptr<AttemptTracker> attempts_;
  std::shared_ptr<AttemptControl> control_;
  std::shared_ptr<NodeLiveness> liveness_;
  std::shared_ptr<DesiredAttempts> desired_;
  std::shared_ptr<Clock> clock_;
  const SchedulerConfig config_;
  // Runs that accept fewer nodes: shrinking when requeued, growing back at a checkpoint.
  RunResizing resizing_{clock_, config_.shrink_after};
  // The nodes as the last cycle left them, read again only when the change feed says a node's
  // state changed (or it is not listening): 10,000 nodes are not decoded 5 times a second.
  // Null feed: read every cycle.
  std::shared_ptr<store::ChangeFeed> changes_;
  // Changes whenever nodes_cache_ may have: read again, or a node declared lost in it.
  uint64_t nodes_epoch_ = 0;
  // The nodes of nodes_cache_ as placement sees them, as of nodes_epoch_.
  PlacementIndex index_;
  // Null: no metrics (tests).
  std::shared_ptr<SchedulerMetrics> metrics_;
  std::shared_ptr<TeamPolicy> teams_;
  // Null: no spares kept (tests of other roles).
  std::shared_ptr<SpareNodes> spares_;
  // The cluster's gauges are summed up at most once a second (a scrape is seldom more often),
  // not every cycle: at 10,000 nodes that is 10,000 map updates a cycle.
  absl::Time summarized_at_ = absl::InfinitePast();
  std::vector<v1::Node> nodes_cache_;
  bool nodes_cached_ = false;
  uint64_t nodes_generation_ = 0;
};

}  // namespace tessera::scheduler
