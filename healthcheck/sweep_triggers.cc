#include "healthcheck/sweep_triggers.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "healthcheck/sweep_plan.h"

namespace tessera::health {

void SweepTriggers::Tick(const absl::StatusOr<std::vector<v1::Sweep>>& sweeps) {
  ScheduleSweeps();
  WatchRuns(sweeps);
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

void SweepTriggers::WatchRuns(const absl::StatusOr<std::vector<v1::Sweep>>& sweeps) {
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
  if (triggers.empty() && !moves_->AnyDue()) return;
  auto nodes = NodesByName(*scheduler_);
  if (!nodes.ok()) return;
  moves_->Tick(*running, *nodes, busy);
  for (const auto& t : triggers) {
    const v1::Run* run = nullptr;
    for (const auto& r : *running) {
      if (r.name() == t.run_name) run = &r;
    }
    if (run == nullptr) continue;
    // A sweep for the run still measuring the suspect (or, for an MFU drop, its nodes) gives
    // its verdict: another of the same nodes would only compete with it, and with the run, for
    // the machines' time.
    absl::StatusOr<v1::Sweep> sweep = RunningSweepFor(sweeps, t);
    spdlog::warn("health: run {}: {}; {}", t.run_name, t.reason,
                 sweep.ok() ? "sweep " + sweep->id() + " is measuring it already"
                            : std::string("sweeping its nodes"));
    if (!sweep.ok()) {
      std::vector<std::string> run_nodes;
      for (const auto& n : run->nodes()) run_nodes.push_back(n.node_name());
      std::vector<std::string> sweep_nodes = run_nodes;
      for (auto& peer : IdlePeers(*nodes, busy, config_.max_peers)) {
        sweep_nodes.push_back(std::move(peer));
      }
      sweep = launcher_->CreateSweep({.trigger = t.trigger,
                                      .nodes = std::move(sweep_nodes),
                                      .requested_by = "tessera-health",
                                      .run_name = t.run_name,
                                      .run_nodes = std::move(run_nodes),
                                      .suspect_node = t.suspect_node,
                                      .trigger_detail = t.reason});
      if (!sweep.ok()) {
        spdlog::warn("health: no sweep for run {}: {}", t.run_name, sweep.status().ToString());
      }
    }
    if (t.trigger == v1::SWEEP_TRIGGER_STRAGGLER) {
      moves_->OnStraggler(*run, t, *nodes, busy, sweep.ok() ? sweep->id() : "");
    }
  }
}

absl::StatusOr<v1::Sweep> SweepTriggers::RunningSweepFor(
    const absl::StatusOr<std::vector<v1::Sweep>>& sweeps, const SweepTriggerEvent& t) {
  if (sweeps.ok()) {
    for (const auto& s : *sweeps) {
      if (s.state() != v1::SWEEP_STATE_RUNNING || s.run_name() != t.run_name) continue;
      const auto& nodes = s.node_names();
      if (t.suspect_node.empty() ||
          std::find(nodes.begin(), nodes.end(), t.suspect_node) != nodes.end()) {
        return s;
      }
    }
  }
  return absl::NotFoundError("no sweep of the run's suspect is running");
}

}  // namespace tessera::health
