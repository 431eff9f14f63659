#pragma once
// Turns the leader's in-memory leases (LeaseTable) into the nodes' stored liveness, once per
// cycle: nodes the store lists as online are adopted, nodes whose lease ended are declared LOST
// (each one written once, with its event), a node lost `flap_threshold` times within
// `flap_window` is cordoned with the times as evidence (flap damping), and live nodes' last
// heartbeats reach the store every `heartbeat_persist_interval`, all nodes due in one write that
// makes no new version of them (NodeStore::RecordHeartbeats). Nothing here is on a
// heartbeat's path: when the store is away, leases go on and this step waits for it.

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "scheduler/service/lease_table.h"
#include "scheduler/service/scheduler_config.h"
#include "services/store/node_store.h"

namespace tessera::scheduler {

// The reason a node cordoned by flap damping carries; it starts with this.
inline constexpr char kFlapCordonPrefix[] = "flapping: ";

class NodeLiveness {
 public:
  NodeLiveness(std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<LeaseTable> leases,
               std::shared_ptr<Clock> clock, SchedulerConfig config);

  // `nodes` is the cycle's inventory; it is updated in place. Returns the nodes declared lost.
  // `reread`: `nodes` was read from the store since the last step, so online nodes this
  // leader holds no lease for (a new term, a node registered through another instance) may be
  // among them and are adopted (LeaseTable::Adopt). Otherwise no node can have come online
  // unseen, and 10,000 nodes are not looked up again.
  std::vector<v1::Node> Step(std::vector<v1::Node>& nodes, bool reread);
  // This instance begins a term of leadership (LeaseTable::Clear).
  void BeginTerm() { leases_->Clear(); }

 private:
  // Writes LOST (and, when it flaps, CORDONED). False when the write did not happen.
  bool DeclareLost(v1::Node& node, absl::Duration silent_for);
  // Whether the node's stored last heartbeat is older than the persist interval.
  bool HeartbeatDue(const v1::Node& node, absl::Time now) const;

  const std::shared_ptr<store::NodeStore> nodes_;
  const std::shared_ptr<LeaseTable> leases_;
  const std::shared_ptr<Clock> clock_;  // the wall clock: for the stored times only
  const SchedulerConfig config_;
  std::map<std::string, std::deque<absl::Time>> losses_;  // per node, within the window
};

}  // namespace tessera::scheduler
