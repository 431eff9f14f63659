#include "healthcheck/sweep_triggers.h"

#include <spdlog/spdlog.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "healthcheck/sweep_plan.h"

namespace tessera::health {

void SweepTriggers::Tick(const absl::StatusOr<std::vector<v1::Sweep>>& sweeps) {
  ScheduleSweeps();
  WatchRuns();
  if (sweeps.ok()) RemeasureDrained(*sweeps);
}

bool SweepTriggers::Due(absl::Time& next, absl::Duration every) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  if (now < next) return false;
  next = now + every;
  return true;
}

void SweepTriggers::RemeasureDrained(const std::vector<v1::Sweep>& sweeps) {
  if (!Due(next_remeasure_, config_.remeasure_interval)) return;
  auto nodes = NodesByName(*scheduler_);
  if (!nodes.ok() || !DeferredVerdicts::AnyDrained(*nodes)) return;
  auto running = runs_->ListRunning();
  if (!running.ok()) return;
  deferred_->Remeasure(*nodes, *running, sweeps, config_.max_peers,
                       [&](const std::vector<std::string>& sweep_nodes, const std::string& node,
                           const std::string& detail) {
                         return launcher_->CreateSweep({.trigger = v1::SWEEP_TRIGGER_SCHEDULED,
                                                        .nodes = sweep_nodes,
                                                        .requested_by = "tessera-health",
                                                        .suspect_node = node,
                                                        .trigger_detail = detail});
                       });
}

void SweepTriggers::ScheduleSweeps() {
  if (config_.sweep_interval <= absl::ZeroDuration()) return;
  if (!Due(next_scheduled_, config_.sweep_interval)) return;
  // Idle nodes only: a canary next to a training run would slow it and measure it.
  auto nodes = NodesByName(*scheduler_);
  auto running = runs_->ListRunning();
  if (!nodes.ok() || !running.ok()) return;
  std::set<std::string> busy;
  for (const auto& r : *running) {
    for (const auto& n : r.nodes()) busy.insert(n.node_name());
  }
  std::vector<std::string> idle;
  for (const auto& [name, n] : *nodes) {
    if (ReadyForChecking(n) && !busy.count(name)) idle.push_back(name);
  }
  if (idle.empty()) return;
  (void)launcher_->CreateSweep({.trigger = v1::SWEEP_TRIGGER_SCHEDULED,
                                .nodes = std::move(idle),
                                .requested_by = "tessera-health"});
}

void SweepTriggers::WatchRuns() {
  if (!Due(next_watch_, config_.run_watch_interval)) return;
  auto running = runs_->ListRunning();
  if (!running.ok()) return;
  std::vector<SweepTriggerEvent> triggers;
  std::set<std::string> ids, busy;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& run : *running) {
      ids.insert(run.id());
      for (const auto& n : run.nodes()) busy.insert(n.node_name());
      if (auto t = watch_.Observe(run)) triggers.push_back(*t);
    }
    watch_.Retain(ids);
    const absl::Time now = clock_->Now();
    for (auto it = moved_at_.begin(); it != moved_at_.end();) {
      it = now - it->second >= config_.straggler_move_rest ? moved_at_.erase(it) : std::next(it);
    }
  }
  if (triggers.empty()) return;
  auto nodes = NodesByName(*scheduler_);
  if (!nodes.ok()) return;
  for (const auto& t : triggers) {
    const v1::Run* run = nullptr;
    for (const auto& r : *running) {
      if (r.name() == t.run_name) run = &r;
    }
    if (run == nullptr) continue;
    const bool move =
        t.trigger == v1::SWEEP_TRIGGER_STRAGGLER && MayMoveOff(*run, t.suspect_node, *nodes, busy);
    spdlog::warn("health: run {}: {}; {}sweeping its nodes", t.run_name, t.reason,
                 move ? "moving it off " + t.suspect_node + " and " : "");
    std::vector<std::string> run_nodes;
    for (const auto& n : run->nodes()) run_nodes.push_back(n.node_name());
    std::vector<std::string> sweep_nodes = run_nodes;
    for (auto& peer : IdlePeers(*nodes, busy, config_.max_peers)) {
      sweep_nodes.push_back(std::move(peer));
    }
    auto sweep = launcher_->CreateSweep({.trigger = t.trigger,
                                         .nodes = std::move(sweep_nodes),
                                         .requested_by = "tessera-health",
                                         .run_name = t.run_name,
                                         .run_nodes = std::move(run_nodes),
                                         .suspect_node = t.suspect_node,
                                         .trigger_detail = t.reason});
    if (!sweep.ok()) {
      spdlog::warn("health: no sweep for run {}: {}", t.run_name, sweep.status().ToString());
    }
    if (move) MoveOff(*run, t, sweep);
  }
}

bool SweepTriggers::MayMoveOff(const v1::Run& run, const std::string& straggler,
                               const std::map<std::string, v1::Node>& nodes,
                               const std::set<std::string>& busy) {
  if (!config_.move_off_stragglers || straggler.empty()) return false;
  const v1::ComputeSpec& compute = run.spec().compute();
  if (compute.node_names_size() > 0) return false;  // it keeps the nodes it names
  {
    absl::MutexLock lock(&mu_);
    if (moved_at_.count(run.id())) return false;
  }
  if (compute.min_nodes() > 0 && compute.min_nodes() < run.nodes_size()) return true;
  auto it = nodes.find(straggler);
  if (it == nodes.end()) return false;
  const v1::Node& slow = it->second;
  // A node the scheduler could place the run's next attempt on instead: online, schedulable,
  // idle, of the same pool (cluster, GPU type and count).
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

void SweepTriggers::MoveOff(const v1::Run& run, const SweepTriggerEvent& t,
                            const absl::StatusOr<v1::Sweep>& sweep) {
  v1::EvictNodeRequest evict;
  evict.set_idempotency_key(
      absl::StrCat("straggler/", run.id(), "/", run.resumption_index(), "/", t.suspect_node));
  evict.set_node_name(t.suspect_node);
  evict.set_reason(v1::ATTEMPT_END_REASON_STRAGGLER);
  evict.set_detection_method(v1::DETECTION_METHOD_STRAGGLER_WATCH);
  evict.set_run_id(run.id());
  evict.set_detail(absl::StrCat(t.reason, "; the run moved off it",
                                sweep.ok() ? "; the node is checked by sweep " + sweep->id() : ""));
  if (auto moved = scheduler_->EvictNode(evict); !moved.ok()) {
    spdlog::warn("health: run {} not moved off {}: {}", t.run_name, t.suspect_node,
                 moved.status().ToString());
    return;
  }
  absl::MutexLock lock(&mu_);
  moved_at_[run.id()] = clock_->Now();
}

}  // namespace tessera::health
