#include "healthcheck/deferred_verdicts.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "healthcheck/sweep_plan.h"

namespace tessera::health {

bool DeferredVerdicts::DeferredIn(const v1::Sweep& sweep, const std::string& node) {
  const std::string deferred = absl::StrCat(kDeferredPrefix, node, ":");
  return std::any_of(sweep.findings().begin(), sweep.findings().end(),
                     [&](const std::string& f) { return absl::StartsWith(f, deferred); });
}

bool DeferredVerdicts::DrainedByUs(const v1::Node& node) {
  return node.admin_state() == v1::NODE_ADMIN_STATE_DRAINING &&
         absl::StartsWith(node.status_reason(), kCordonReasonPrefix);
}

bool DeferredVerdicts::AnyDrained(const std::map<std::string, v1::Node>& nodes) {
  return std::any_of(nodes.begin(), nodes.end(),
                     [](const auto& named) { return DrainedByUs(named.second); });
}

void DeferredVerdicts::Defer(v1::Sweep& sweep, const Anomaly& a,
                             const std::set<std::string>& others) {
  // Evicting every tenant on a node because of what one of them may have done to the
  // measurement is what a neighbour must not be able to cause: nothing new goes there, and it
  // is measured again once idle.
  constexpr char kDrained[] = " ran on it: drained until it is measured idle";
  const std::string why =
      absl::StrCat(a.finding, "; measured while ", absl::StrJoin(others, ", "), kDrained);
  sweep.add_findings(absl::StrCat(kDeferredPrefix, why));
  if (metrics_) metrics_->Deferred(a.verdict);
  spdlog::warn("health: sweep {}: {}", sweep.id(), why);
  // The node's reason is read by every user: it counts the runs, the sweep (operators') names
  // them.
  const std::string runs = others.size() == 1 ? std::string("another tenant's run")
                                              : absl::StrCat(others.size(), " other tenants' runs");
  if (auto st =
          cordon_->Drain(a.node, absl::StrCat(kCordonReasonPrefix, "sweep ", sweep.id(), ": ",
                                              a.finding, "; measured while ", runs, kDrained));
      !st.ok()) {
    spdlog::error("health: draining {} failed: {}", a.node, st.ToString());
  }
}

void DeferredVerdicts::Remeasure(const std::map<std::string, v1::Node>& nodes,
                                 const std::vector<v1::Run>& running,
                                 const std::vector<v1::Sweep>& sweeps, int max_peers,
                                 const MakeSweep& make) const {
  std::set<std::string> busy;
  for (const auto& r : running) {
    for (const auto& n : r.nodes()) busy.insert(n.node_name());
  }
  for (const auto& s : sweeps) {
    if (s.state() != v1::SWEEP_STATE_RUNNING) continue;
    busy.insert(s.node_names().begin(), s.node_names().end());  // being measured now
  }
  for (const auto& [node, n] : nodes) {
    if (n.liveness() != v1::NODE_LIVENESS_ONLINE || !DrainedByUs(n) || busy.count(node)) continue;
    std::vector<std::string> sweep_nodes = {node};
    for (auto& peer : IdlePeers(nodes, busy, max_peers)) sweep_nodes.push_back(std::move(peer));
    auto sweep =
        make(sweep_nodes, node,
             absl::StrCat("measuring ", node,
                          " again now that it is idle (drained: ", n.status_reason(), ")"));
    if (!sweep.ok()) {
      spdlog::warn("health: no sweep of drained {}: {}", node, sweep.status().ToString());
      continue;
    }
    busy.insert(sweep->node_names().begin(), sweep->node_names().end());
  }
}

void DeferredVerdicts::ReturnPassed(const v1::Sweep& finished,
                                    const std::map<std::string, v1::Node>& nodes) const {
  const auto in = [](const auto& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  for (const auto& name : finished.node_names()) {
    auto it = nodes.find(name);
    if (it == nodes.end() || !DrainedByUs(it->second)) continue;
    if (in(finished.anomalous_nodes(), name) || in(finished.inconclusive_nodes(), name) ||
        in(finished.repeat_nodes(), name) || DeferredIn(finished, name)) {
      continue;
    }
    auto st = cordon_->Uncordon(name, absl::StrCat(kCordonReasonPrefix, "sweep ", finished.id(),
                                                   " measured it idle and it passed"));
    if (st.ok()) spdlog::info("health: {} returned to service: passed idle", name);
  }
}

}  // namespace tessera::health
