#include "healthcheck/sweep_triggers.h"

#include <spdlog/spdlog.h>

#include <set>

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
                         return launcher_->CreateSweep(v1::SWEEP_TRIGGER_SCHEDULED, sweep_nodes,
                                                       "tessera-health", "", node, detail);
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
  (void)launcher_->CreateSweep(v1::SWEEP_TRIGGER_SCHEDULED, idle, "tessera-health", "", "");
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
  }
  if (triggers.empty()) return;
  auto nodes = NodesByName(*scheduler_);
  if (!nodes.ok()) return;
  for (const auto& t : triggers) {
    spdlog::warn("health: run {}: {}; sweeping its nodes", t.run_name, t.reason);
    std::vector<std::string> sweep_nodes;
    for (const auto& run : *running) {
      if (run.name() != t.run_name) continue;
      for (const auto& n : run.nodes()) sweep_nodes.push_back(n.node_name());
    }
    for (auto& peer : IdlePeers(*nodes, busy, config_.max_peers)) {
      sweep_nodes.push_back(std::move(peer));
    }
    auto sweep = launcher_->CreateSweep(t.trigger, sweep_nodes, "tessera-health", t.run_name,
                                        t.suspect_node, t.reason);
    if (!sweep.ok()) {
      spdlog::warn("health: no sweep for run {}: {}", t.run_name, sweep.status().ToString());
    }
  }
}

}  // namespace tessera::health
