#include "scheduler/service/node_liveness.h"

#include <spdlog/spdlog.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/timestamps.h"
#include "scheduler/service/node_events.h"

namespace tessera::scheduler {

NodeLiveness::NodeLiveness(std::shared_ptr<store::NodeStore> nodes,
                           std::shared_ptr<LeaseTable> leases, std::shared_ptr<Clock> clock,
                           SchedulerConfig config)
    : nodes_(std::move(nodes)),
      leases_(std::move(leases)),
      clock_(std::move(clock)),
      config_(config) {}

void NodeLiveness::Adopt(const std::vector<v1::Node>& nodes) {
  std::vector<std::string> online;
  for (const auto& n : nodes) {
    if (n.liveness() == v1::NODE_LIVENESS_ONLINE) online.push_back(n.name());
  }
  leases_->Adopt(online);
}

std::vector<v1::Node> NodeLiveness::ExpireLeases(std::vector<v1::Node>& nodes, bool complete) {
  std::vector<v1::Node> lost;
  const std::vector<ExpiredLease> expired = leases_->Expired();
  if (!expired.empty()) {
    // Keys of their own: DeclareLost replaces the node, and with it the name a view would see.
    absl::flat_hash_map<std::string, v1::Node*> by_name;
    for (auto& n : nodes) by_name.emplace(n.name(), &n);
    for (const ExpiredLease& e : expired) {
      auto it = by_name.find(e.node);
      if (it == by_name.end() && !complete) continue;  // not in this copy: the next read says
      if (it == by_name.end() || it->second->liveness() != v1::NODE_LIVENESS_ONLINE) {
        leases_->Revoke(e.node);  // removed, or already lost in the store
        continue;
      }
      if (!DeclareLost(*it->second, e.silent_for)) continue;  // the next cycle tries again
      leases_->Revoke(e.node);
      lost.push_back(*it->second);
    }
  }
  return lost;
}

std::set<std::string> NodeLiveness::Suspects() {
  std::set<std::string> now;
  for (std::string& node : leases_->Suspected()) {
    if (!suspects_.count(node)) {
      spdlog::warn("node {} missed a heartbeat: no new work goes to it until it is heard again",
                   node);
    }
    now.insert(std::move(node));
  }
  suspects_ = now;
  return now;
}

void NodeLiveness::StoreLastHeartbeats(std::vector<v1::Node>& nodes) {
  const absl::Time now = clock_->Now();
  std::vector<store::HeartbeatSummary> due;
  std::vector<v1::Node*> due_nodes;
  for (auto& n : nodes) {
    // The time check first: it is free, and most nodes are not due in a given cycle.
    if (n.liveness() == v1::NODE_LIVENESS_ONLINE && HeartbeatDue(n, now) &&
        leases_->Holds(n.name())) {
      // Within a heartbeat interval of the last heartbeat, which is as exact as people need.
      due.push_back({n.name(), now, now + config_.lease});
      due_nodes.push_back(&n);
    }
  }
  // One write for every node due, not a version of each: the database sees a summary of the
  // beats, never the beats themselves.
  if (!due.empty()) {
    if (auto st = nodes_->RecordHeartbeats(due); st.ok()) {
      for (v1::Node* n : due_nodes) store::KeepLaterHeartbeat(*n, now, now + config_.lease);
    } else {
      spdlog::warn("storing {} nodes' last heartbeat: {}", due.size(), st.ToString());
    }
  }
}

bool NodeLiveness::DeclareLost(v1::Node& node, absl::Duration silent_for) {
  const absl::Time now = clock_->Now();
  v1::Node lost = node;
  lost.set_liveness(v1::NODE_LIVENESS_LOST);
  std::vector<v1::NodeEvent> events = {SchedulerNodeEvent(
      node.name(), v1::NODE_EVENT_TYPE_LOST,
      absl::StrCat("no heartbeat for ",
                   absl::FormatDuration(absl::Trunc(silent_for, absl::Milliseconds(1))),
                   "; lease expired"),
      now)};
  auto& times = losses_[node.name()];
  std::deque<absl::Time> with_this = times;
  with_this.push_back(now);
  while (!with_this.empty() && now - with_this.front() > config_.flap_window) with_this.pop_front();
  const bool flapping = static_cast<int>(with_this.size()) >= config_.flap_threshold &&
                        node.admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE;
  if (flapping) {
    std::vector<std::string> when;
    for (absl::Time t : with_this)
      when.push_back(absl::FormatTime("%H:%M:%S", t, absl::UTCTimeZone()));
    const std::string reason = absl::StrCat(
        kFlapCordonPrefix, "lost ", with_this.size(), " times within ",
        absl::FormatDuration(config_.flap_window), " (at ", absl::StrJoin(when, ", "), " UTC)");
    lost.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
    lost.set_status_reason(reason);
    events.push_back(SchedulerNodeEvent(node.name(), v1::NODE_EVENT_TYPE_CORDONED, reason, now));
  }
  auto updated = nodes_->UpdateNode(lost, node.version(), events);
  if (!updated.ok()) {
    // A conflict (a registration or an operator won the race) or the store is away.
    spdlog::warn("node {}: could not record it lost: {}", node.name(), updated.status().ToString());
    return false;
  }
  times = std::move(with_this);
  node = *std::move(updated);
  spdlog::warn("node {} lost: no heartbeat for {}{}", node.name(), absl::FormatDuration(silent_for),
               flapping ? "; cordoned for flapping" : "");
  return true;
}

bool NodeLiveness::HeartbeatDue(const v1::Node& node, absl::Time now) const {
  return !node.has_last_heartbeat_at() ||
         now - FromProtoTime(node.last_heartbeat_at()) >= config_.heartbeat_persist_interval;
}

}  // namespace tessera::scheduler
