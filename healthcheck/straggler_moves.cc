#include "healthcheck/straggler_moves.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::health {

bool StragglerMoves::CanGoOn(const v1::Run& run, const std::string& straggler,
                             const std::map<std::string, v1::Node>& nodes,
                             const std::set<std::string>& busy) {
  const v1::ComputeSpec& compute = run.spec().compute();
  if (compute.node_names_size() > 0) return false;  // it keeps the nodes it names
  if (compute.min_nodes() > 0 && compute.min_nodes() < run.nodes_size()) return true;
  auto it = nodes.find(straggler);
  if (it == nodes.end()) return false;
  const v1::Node& slow = it->second;
  for (const auto& [name, n] : nodes) {
    if (name != straggler && !busy.count(name) && n.liveness() == v1::NODE_LIVENESS_ONLINE &&
        n.admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE &&
        n.health() != v1::NODE_HEALTH_UNHEALTHY && n.cluster() == slow.cluster() &&
        n.gpu_type() == slow.gpu_type() && n.gpu_count() == slow.gpu_count()) {
      return true;
    }
  }
  return false;
}

bool StragglerMoves::Resting(const std::string& run_id) {
  auto it = moves_.find(run_id);
  if (it == moves_.end()) return false;
  const absl::Duration rest = config_.rest * (1 << std::min(it->second.count - 1, 5));
  return clock_->Now() - it->second.last < rest;
}

bool StragglerMoves::OnStraggler(const v1::Run& run, const SweepTriggerEvent& t,
                                 const std::map<std::string, v1::Node>& nodes,
                                 const std::set<std::string>& busy, const std::string& sweep_id) {
  if (!config_.enabled || t.suspect_node.empty()) return false;
  {
    absl::MutexLock lock(&mu_);
    if (Resting(run.id())) {
      pending_[run.id()] = Pending{run.resumption_index(), t, sweep_id};
      spdlog::info(
          "health: run {} rests from its last move: moved off {} once the rest is over "
          "if it still straggles then",
          t.run_name, t.suspect_node);
      return false;
    }
  }
  if (!CanGoOn(run, t.suspect_node, nodes, busy)) return false;
  return Move(run, t, sweep_id, "");
}

bool StragglerMoves::AnyDue() {
  absl::MutexLock lock(&mu_);
  for (const auto& [run_id, pending] : pending_) {
    if (!Resting(run_id)) return true;
  }
  return false;
}

void StragglerMoves::Tick(const std::vector<v1::Run>& running,
                          const std::map<std::string, v1::Node>& nodes,
                          const std::set<std::string>& busy) {
  std::vector<std::pair<v1::Run, Pending>> due;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto it = moves_.begin(); it != moves_.end();) {
      it = now - it->second.last >= config_.memory ? moves_.erase(it) : std::next(it);
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto run = std::find_if(running.begin(), running.end(),
                              [&](const v1::Run& r) { return r.id() == it->first; });
      if (run == running.end() || run->resumption_index() != it->second.resumption) {
        it = pending_.erase(it);  // ended, or moved on already
      } else if (Resting(it->first)) {
        ++it;
      } else {
        due.emplace_back(*run, std::move(it->second));
        it = pending_.erase(it);
      }
    }
  }
  for (const auto& [run, pending] : due) {
    const double ratio = StragglerRatio(run, pending.trigger.suspect_node);
    if (ratio <= straggler_factor_) continue;  // not any more: it stays
    if (!CanGoOn(run, pending.trigger.suspect_node, nodes, busy)) continue;
    Move(run, pending.trigger, pending.sweep_id,
         absl::StrFormat(" (seen during the run's rest after its last move; %.1f x at its end)",
                         ratio));
  }
}

bool StragglerMoves::Move(const v1::Run& run, const SweepTriggerEvent& t,
                          const std::string& sweep_id, const std::string& note) {
  v1::EvictNodeRequest evict;
  evict.set_idempotency_key(
      absl::StrCat("straggler/", run.id(), "/", run.resumption_index(), "/", t.suspect_node));
  evict.set_node_name(t.suspect_node);
  evict.set_reason(v1::ATTEMPT_END_REASON_STRAGGLER);
  evict.set_detection_method(v1::DETECTION_METHOD_STRAGGLER_WATCH);
  evict.set_run_id(run.id());
  evict.set_detail(
      absl::StrCat(t.reason, note, "; the run moved off it",
                   sweep_id.empty() ? "" : "; the node is checked by sweep " + sweep_id));
  if (auto moved = scheduler_->EvictNode(evict); !moved.ok()) {
    spdlog::warn("health: run {} not moved off {}: {}", t.run_name, t.suspect_node,
                 moved.status().ToString());
    return false;
  }
  spdlog::warn("health: run {} moved off {}{}", t.run_name, t.suspect_node, note);
  absl::MutexLock lock(&mu_);
  Moves& moves = moves_[run.id()];
  moves.last = clock_->Now();
  ++moves.count;
  return true;
}

}  // namespace tessera::health
