#include "scheduler/service/spare_placement.h"

#include <algorithm>
#include <map>

#include "scheduler/placement/proto_convert.h"
#include "scheduler/placement/quota_ledger.h"
#include "scheduler/service/spare_nodes.h"

namespace tessera::scheduler {
namespace {

// Drops, in placement order, each placement of `decision` that would take its run's team past a
// quota after the ones kept, with the preemptions made for it.
void KeepWithinQuotas(const CapacityIndex& index, const ClusterState& state,
                      const std::vector<QueuedRun>& resuming, PlacementDecision& decision) {
  if (state.quotas.empty() || decision.placements.empty()) return;
  // What each team holds now, over the whole cluster, as the ordinary pass's Placer counts it;
  // charged here as resumptions are kept.
  const Placer whole(index, state);
  QuotaLedger ledger = whole.quotas();
  std::map<std::string, std::string> team_of;
  for (const QueuedRun& q : resuming) team_of[q.run_id] = q.team;
  std::set<std::string> dropped;
  std::erase_if(decision.placements, [&](const Placement& p) {
    const std::string& team = team_of[p.run_id];
    std::map<uint32_t, int> gpus_by_pool;
    for (const NodeAssignment& a : p.nodes) {
      const uint32_t node = whole.capacity().FindNode(a.node);
      if (node != kNoNode)
        gpus_by_pool[whole.capacity().PoolOf(node)] += static_cast<int>(a.gpu_indices.size());
    }
    for (const auto& [pool, gpus] : gpus_by_pool) {
      if (gpus > ledger.Headroom(team, pool)) {
        dropped.insert(p.run_id);
        return true;
      }
    }
    for (const auto& [pool, gpus] : gpus_by_pool) ledger.Charge(team, pool, gpus, 1);
    return false;
  });
  std::erase_if(decision.preemptions,
                [&](const Preemption& p) { return dropped.count(p.for_run_id) > 0; });
}

}  // namespace

std::vector<QueuedRun> MayBorrowSpares(const std::vector<QueuedRun>& queue,
                                       const std::vector<v1::Run>& queued,
                                       const std::set<std::string>& placed) {
  const bool resumption_waits = std::any_of(queued.begin(), queued.end(), [&](const v1::Run& r) {
    return ResumesAfterNodeFault(r) && !placed.count(r.id());
  });
  std::vector<QueuedRun> borrowers;
  if (resumption_waits) return borrowers;
  for (const QueuedRun& q : queue) {
    if (q.preemptible && !placed.count(q.run_id)) borrowers.push_back(q);
  }
  return borrowers;
}

SparePlacement::SparePlacement(const std::vector<v1::Node>& nodes,
                               const std::set<std::string>& suspects, int64_t now_micros)
    : nodes_(nodes), suspects_(suspects), now_micros_(now_micros) {}

PlacementDecision SparePlacement::Resumptions(const CapacityIndex& index,
                                              const std::vector<QueuedRun>& queue,
                                              const std::vector<const v1::Run*>& queued_runs,
                                              const ClusterState& state,
                                              const std::set<std::string>& stopping) const {
  std::vector<QueuedRun> resuming;
  std::set<std::string> warm;  // the spares, and the nodes the resuming runs ran on
  for (size_t i = 0; i < queue.size(); ++i) {
    // A run that names its nodes gets those or none.
    if (!ResumesAfterNodeFault(*queued_runs[i]) || !queue[i].request.node_names.empty()) continue;
    resuming.push_back(queue[i]);
    resuming.back().min_nodes = 0;  // all of its nodes here, or the ordinary pass decides
    // A resumption outranks any preemptible work on a spare, whatever their priorities: the
    // private placer below sees it high and that work lowest.
    resuming.back().priority = Priority::kHigh;
    for (const auto& n : queued_runs[i]->requeued_from_nodes()) warm.insert(n);
  }
  if (resuming.empty()) return {};
  ClusterState here;  // the spares and those nodes only; quotas are checked over the cluster
  std::set<std::string> spare_names;
  for (const v1::Node& n : nodes_) {
    if (!n.spare()) continue;
    warm.insert(n.name());
    spare_names.insert(n.name());
    here.nodes.push_back(NodeInfoFromProto(n));
  }
  if (here.nodes.empty()) return {};
  for (const v1::Node& n : nodes_) {
    if (n.spare() || !warm.count(n.name())) continue;
    here.nodes.push_back(NodeInfoFromProto(n));
    if (suspects_.count(n.name())) here.nodes.back().schedulable = false;
  }
  std::set<std::string> present;  // a node the run ran on may have been removed since
  for (const NodeInfo& n : here.nodes) present.insert(n.name);
  // Preemptible work told to stop is left out, as if gone: a resumption placed where it is
  // waits for it to leave.
  std::set<std::string> leaving_nodes;
  for (const RunningAllocation& running : state.running) {
    RunningAllocation on_warm = running;
    std::erase_if(on_warm.nodes, [&](const NodeAssignment& a) { return !present.count(a.node); });
    if (on_warm.nodes.empty()) continue;
    const bool on_a_spare = std::any_of(on_warm.nodes.begin(), on_warm.nodes.end(),
                                        [&](const auto& a) { return spare_names.count(a.node); });
    if (on_a_spare && stopping.count(running.run_id)) {
      for (const auto& a : on_warm.nodes) leaving_nodes.insert(a.node);
      continue;
    }
    // Only preemptible work on a spare may be stopped for a resumption; nothing else is.
    on_warm.preemptible = on_warm.preemptible && on_a_spare;
    if (on_warm.preemptible) on_warm.priority = Priority::kLowest;
    here.running.push_back(std::move(on_warm));
  }
  Placer placer(here);
  PlacementDecision decision = placer.PlaceQueue(resuming, {.now_micros = now_micros_});
  KeepWithinQuotas(index, state, resuming, decision);
  for (Placement& p : decision.placements) {
    for (const auto& a : p.nodes)
      p.after_preemption = p.after_preemption || leaving_nodes.count(a.node);
  }
  return decision;
}

PlacementDecision SparePlacement::Preemptible(const std::vector<QueuedRun>& preemptible,
                                              const ClusterState& state,
                                              const PlacementDecision& ordinary,
                                              const std::set<std::string>& held) const {
  if (preemptible.empty()) return {};
  ClusterState here;  // the spares only; no quotas: preemptible work borrows idle GPUs anyway
  for (const v1::Node& n : nodes_) {
    if (!n.spare() || held.count(n.name())) continue;
    here.nodes.push_back(NodeInfoFromProto(n));
    if (suspects_.count(n.name())) here.nodes.back().schedulable = false;
  }
  if (here.nodes.empty()) return {};
  std::set<std::string> spare_names;
  for (const NodeInfo& n : here.nodes) spare_names.insert(n.name);
  std::vector<RunningAllocation> holding = state.running;
  for (const Placement& p : ordinary.placements)
    holding.push_back({.run_id = p.run_id, .nodes = p.nodes});
  for (RunningAllocation running : holding) {
    std::erase_if(running.nodes, [&](const auto& a) { return !spare_names.count(a.node); });
    if (running.nodes.empty()) continue;
    running.preemptible = false;  // preemptible work never displaces other work here
    here.running.push_back(std::move(running));
  }
  std::vector<QueuedRun> queue = preemptible;
  for (QueuedRun& q : queue) q.min_nodes = 0;
  Placer placer(here);
  PlacementDecision decision = placer.PlaceQueue(queue, {.now_micros = now_micros_});
  decision.preemptions.clear();
  std::erase_if(decision.placements, [](const Placement& p) { return p.after_preemption; });
  return decision;
}

}  // namespace tessera::scheduler
