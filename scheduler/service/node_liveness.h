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
#include <set>
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

  // `nodes` was just read from the store: the online ones this leader holds no lease for (a new
  // term, a node registered through another instance) get one from now (LeaseTable::Adopt).
  // Between reads no node can come online unseen, so 10,000 nodes are not looked up each cycle.
  void Adopt(const std::vector<v1::Node>& nodes);
  // Declares the nodes whose lease ended lost. `nodes` is the cycle's copy of the inventory,
  // updated in place; it may be older than the store (another writer's change makes a node's
  // write fail, and the next cycle tries again). `complete`: `nodes` was just read, so a lease
  // whose node is not in it is a removed node's, and is dropped; otherwise the node may have
  // registered since the copy was read, and its lease waits for a complete list. Returns the
  // nodes declared lost.
  std::vector<v1::Node> ExpireLeases(std::vector<v1::Node>& nodes, bool complete);
  // Stores, in one write, the last heartbeat of every live node whose stored one is older than
  // the persist interval (for people: leases never wait for the database). Once per cycle.
  void StoreLastHeartbeats(std::vector<v1::Node>& nodes);
  // Nodes silent for one missed beat, not yet lost (LeaseTable::Suspected): the cycle places
  // nothing on them. Each suspicion is logged once, when it begins.
  std::set<std::string> Suspects();
  // This instance begins a term of leadership (LeaseTable::Clear).
  void BeginTerm() {
    leases_->Clear();
    suspects_.clear();
  }

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
  std::set<std::string> suspects_;                        // as the last cycle found them
};

}  // namespace tessera::scheduler
