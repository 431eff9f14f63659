#include "scheduler/service/scheduling_cycle.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "scheduler/placement/placer.h"
#include "scheduler/placement/proto_convert.h"
#include "scheduler/service/spare_placement.h"
#include "scheduler/service/start_message.h"

namespace tessera::scheduler {
namespace {

v1::Attempt AttemptOf(const v1::Run& run) {
  v1::Attempt a;
  a.set_run_id(run.id());
  a.set_resumption_index(run.resumption_index());
  *a.mutable_nodes() = run.nodes();
  return a;
}

std::string HostOf(const std::string& address) {
  if (address.empty()) return "127.0.0.1";
  const auto colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

SchedulingCycle::SchedulingCycle(
    std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
    std::shared_ptr<WorkerRegistry> workers, std::shared_ptr<AttemptTracker> attempts,
    std::shared_ptr<AttemptControl> control, std::shared_ptr<NodeLiveness> liveness,
    std::shared_ptr<DesiredAttempts> desired, std::shared_ptr<Clock> clock, SchedulerConfig config,
    std::shared_ptr<store::ChangeFeed> changes, std::shared_ptr<SchedulerMetrics> metrics,
    std::shared_ptr<TeamPolicy> teams, std::shared_ptr<SpareNodes> spares)
    : nodes_(std::move(nodes)),
      runs_(std::move(runs)),
      workers_(std::move(workers)),
      attempts_(std::move(attempts)),
      control_(std::move(control)),
      liveness_(std::move(liveness)),
      desired_(std::move(desired)),
      clock_(std::move(clock)),
      config_(config),
      changes_(std::move(changes)),
      metrics_(std::move(metrics)),
      teams_(std::move(teams)),
      spares_(std::move(spares)) {}

absl::StatusOr<CycleStats> SchedulingCycle::RunCycle() {
  // A cycle that fails part way reads the nodes afresh next time.
  const bool cached = nodes_cached_;
  nodes_cached_ = false;
  const absl::Time start = clock_->Now();
  auto stats = Cycle(cached);
  if (stats.ok()) nodes_cached_ = changes_ != nullptr;
  if (stats.ok() && metrics_) {
    metrics_->CycleTook(clock_->Now() - start);
    for (int i = 0; i < stats->lost_nodes; ++i) metrics_->LeaseExpired();
    metrics_->Suspected(static_cast<size_t>(stats->suspected_nodes));
    for (int i = 0; i < stats->preempted; ++i) metrics_->Preempted();
  }
  return stats;
}

absl::StatusOr<CycleStats> SchedulingCycle::Cycle(bool nodes_cached) {
  CycleStats stats;
  // Silent nodes are declared lost first, on the copy of the nodes the cycle starts with, so a
  // dead node is declared at its lease's end: reading 10,000 nodes again (after any node's
  // change, this cycle's own LOST included) and the runs take a hundred milliseconds and more
  // on a busy machine. The copy has this instance's own writes; a node another writer changed
  // meanwhile fails its write, and the next cycle tries again. The attempts of the nodes lost
  // end below, with those of any node a failed cycle declared lost and left.
  std::vector<v1::Node> lost;
  if (nodes_cached) lost = liveness_->ExpireLeases(nodes_cache_, /*complete=*/false);
  // The nodes are read again when one changed; the runs every cycle. What the cycle changes it
  // learns from the answers to its own writes (and keeps in its copy of the nodes).
  if (changes_ == nullptr || !changes_->live() || !nodes_cached ||
      changes_->Generation(store::ChangeTopic::kNodes) != nodes_generation_) {
    // The generation before the read: a change committed after it is seen next cycle.
    if (changes_ != nullptr) nodes_generation_ = changes_->Generation(store::ChangeTopic::kNodes);
    TESSERA_ASSIGN_OR_RETURN(nodes_cache_, nodes_->ListNodes({}));
    liveness_->Adopt(nodes_cache_);
    ++nodes_epoch_;
    // The nodes the copy lacked, and the leases of removed ones.
    for (v1::Node& n : liveness_->ExpireLeases(nodes_cache_, /*complete=*/true)) {
      lost.push_back(std::move(n));
    }
  }
  liveness_->StoreLastHeartbeats(nodes_cache_);
  stats.lost_nodes = static_cast<int>(lost.size());
  std::set<std::string> suspects = liveness_->Suspects();
  stats.suspected_nodes = static_cast<int>(suspects.size());
  if (!lost.empty()) ++nodes_epoch_;  // the placement index is built again
  std::vector<v1::Node>& nodes = nodes_cache_;
  TESSERA_ASSIGN_OR_RETURN(
      auto runs,
      runs_->ListRuns({v1::RUN_STATUS_PENDING, v1::RUN_STATUS_QUEUED, v1::RUN_STATUS_STARTING,
                       v1::RUN_STATUS_RUNNING, v1::RUN_STATUS_TERMINATING}));
  // What the cycle found, published once it is done (a failed cycle publishes nothing).
  std::optional<ClusterSummary> summary;
  if (metrics_ && clock_->Now() - summarized_at_ >= absl::Seconds(1)) {
    summarized_at_ = clock_->Now();
    summary = SummarizeCluster(runs, nodes, summarized_at_);
  }
  std::vector<v1::Run> pending, queued, active;
  for (auto& r : runs) {
    if (r.status() == v1::RUN_STATUS_PENDING) {
      pending.push_back(std::move(r));
    } else if (r.status() == v1::RUN_STATUS_QUEUED) {
      queued.push_back(std::move(r));
    } else {
      active.push_back(std::move(r));
    }
  }
  attempts_->SetActive(active);
  TESSERA_RETURN_IF_ERROR(AdmitPending(pending, stats, queued));
  TESSERA_RETURN_IF_ERROR(EndAttemptsOnLostNodes(nodes, lost, active, queued));
  SendStops(active, stats);

  // Attempts that ended above (lost nodes) hold nothing any more, and their runs may be back
  // in the queue: place against what is still active.
  std::erase_if(active, [&](const v1::Run& r) { return !attempts_->IsActive(r.id()); });
  // The spares are kept before anything is placed: an operator's spares come before the queue.
  if (spares_ && (spares_->enabled() || std::any_of(nodes.begin(), nodes.end(),
                                                    [](const auto& n) { return n.spare(); }))) {
    std::set<std::string> busy;  // preemptible work on a spare leaves it a spare
    for (const auto& r : active) {
      if (r.spec().scheduling().preemptible()) continue;
      for (const auto& n : r.nodes()) busy.insert(n.node_name());
    }
    for (const auto& r : attempts_->Draining()) {
      for (const auto& n : r.nodes()) busy.insert(n.node_name());
    }
    TESSERA_ASSIGN_OR_RETURN(const bool changed, spares_->Keep(nodes, active, busy, suspects));
    if (changed) ++nodes_epoch_;  // the placement index leaves spares out
  }
  // A run on fewer nodes than it asks for is looked at each cycle: it may grow back.
  if (!queued.empty() || std::any_of(active.begin(), active.end(), RunsShrunk)) {
    TESSERA_RETURN_IF_ERROR(Place(queued, active, nodes, std::move(suspects), stats));
  }
  if (summary) metrics_->Publish(*summary);
  return stats;
}

absl::Status SchedulingCycle::AdmitPending(const std::vector<v1::Run>& pending, CycleStats& stats,
                                           std::vector<v1::Run>& queued) {
  for (const auto& run : pending) {
    v1::Attempt a;
    a.set_run_id(run.id());
    a.set_resumption_index(run.resumption_index() + 1);
    a.set_status(v1::RUN_STATUS_QUEUED);
    auto admitted = runs_->RecordAttempt(a);
    if (absl::IsUnavailable(admitted.status())) return admitted.status();
    if (!admitted.ok()) continue;
    ++stats.admitted;
    queued.push_back(*std::move(admitted));
  }
  return absl::OkStatus();
}

absl::Status SchedulingCycle::EndAttemptsOnLostNodes(const std::vector<v1::Node>& nodes,
                                                     const std::vector<v1::Node>& just_lost,
                                                     const std::vector<v1::Run>& active,
                                                     std::vector<v1::Run>& queued) {
  // From the stored liveness, not only this cycle's losses: an attempt whose end a failed cycle
  // (or an earlier leader) left undone is ended now.
  absl::flat_hash_set<std::string> lost_nodes;
  for (const auto& n : nodes) {
    if (n.liveness() == v1::NODE_LIVENESS_LOST) lost_nodes.insert(n.name());
  }
  for (const auto& run : active) {
    const auto on_lost = std::find_if(run.nodes().begin(), run.nodes().end(), [&](const auto& n) {
      return lost_nodes.contains(n.node_name());
    });
    if (on_lost == run.nodes().end()) continue;
    const std::string& node = on_lost->node_name();
    AttemptState state = attempts_->State(run.id(), run.resumption_index());
    state.first_failed_node = node;
    // The other nodes stop their ranks; the lost node's worker fences itself.
    control_->StopAttempt(run, v1::ATTEMPT_END_REASON_NODE_FAILURE, "a node of the run was lost");
    v1::Run ended;
    const absl::Status st = control_->EndAttempt(
        run.id(), run.resumption_index(), state,
        run.stop_requested() ? v1::ATTEMPT_END_REASON_STOPPED : v1::ATTEMPT_END_REASON_NODE_FAILURE,
        v1::DETECTION_METHOD_LEASE_EXPIRY, absl::StrCat("node ", node, " was lost"), &ended);
    if (absl::IsUnavailable(st)) return st;
    if (!st.ok()) {
      // Refused (the run moved on meanwhile): the next cycle sees it as it is now. One run
      // refused again and again must not stop every cycle from placing.
      spdlog::warn("run {}: ending its attempt {} on lost node {}: {}", run.name(),
                   run.resumption_index(), node, st.ToString());
      continue;
    }
    // Its lost nodes' ranks die by their workers' fence, and no lost node is offered work before
    // then (WorkerSessions::RefuseUnfenced): the attempt does not wait for them to drain.
    for (const auto& n : run.nodes()) {
      if (lost_nodes.contains(n.node_name())) attempts_->NodeLost(n.node_name());
    }
    if (ended.status() == v1::RUN_STATUS_QUEUED) queued.push_back(std::move(ended));
  }
  // Nothing runs on a node just lost, of older attempts either.
  for (const auto& n : just_lost) attempts_->NodeLost(n.name());
  return absl::OkStatus();
}

void SchedulingCycle::SendStops(const std::vector<v1::Run>& active, CycleStats& stats) {
  const absl::Time now = clock_->Now();
  for (const auto& run : active) {
    if (run.status() != v1::RUN_STATUS_TERMINATING) continue;
    const AttemptState state = attempts_->State(run.id(), run.resumption_index());
    if (state.stop_sent_at == absl::InfinitePast()) {
      control_->StopAttempt(run, v1::ATTEMPT_END_REASON_STOPPED, run.status_reason());
      ++stats.stops_sent;
    } else if (now - state.stop_sent_at > config_.stop_grace + 2 * config_.lease) {
      // The workers never confirmed: their leases would have expired had they been gone, so
      // they are alive but silent. Record the stop; fencing keeps the ranks from overlapping.
      (void)control_->EndAttempt(run.id(), run.resumption_index(), state,
                                 v1::ATTEMPT_END_REASON_STOPPED, v1::DETECTION_METHOD_OPERATOR,
                                 "stop not confirmed by the workers");
    }
  }
}

absl::Status SchedulingCycle::Place(const std::vector<v1::Run>& queued,
                                    const std::vector<v1::Run>& active,
                                    const std::vector<v1::Node>& nodes,
                                    std::set<std::string> suspects, CycleStats& stats) {
  ClusterState state;
  if (teams_) state.quotas = teams_->Quotas();
  index_.Refresh(nodes, nodes_epoch_, std::move(suspects));
  for (const auto& run : active) {
    if (run.nodes_size() == 0) continue;
    RunningAllocation alloc = AllocationFromProto(run, AttemptOf(run));
    alloc.started_at_micros =
        absl::ToUnixMicros(attempts_->PlacedAt(run.id(), run.resumption_index()));
    // A run already being stopped cannot be chosen as a victim again.
    if (attempts_->StopSent(run.id(), run.resumption_index())) alloc.preemptible = false;
    state.running.push_back(std::move(alloc));
  }
  RendezvousPorts ports(config_.master_port_base, config_.master_port_span);
  for (const auto& run : active) ports.Taken(run);
  std::set<std::string> waiting_for_drain;
  for (const v1::Run& draining : attempts_->Draining()) {
    ports.Taken(draining);
    RunningAllocation alloc = AllocationFromProto(draining, AttemptOf(draining));
    alloc.preemptible = false;
    state.running.push_back(std::move(alloc));
    waiting_for_drain.insert(draining.id());
  }
  const int64_t now_micros = absl::ToUnixMicros(clock_->Now());
  std::vector<QueuedRun> queue;
  std::map<std::string, const v1::Run*> queued_by_id;
  std::vector<const v1::Run*> queued_runs;  // queue[i] is made from queued_runs[i]
  for (const auto& r : queued) {
    if (waiting_for_drain.count(r.id())) continue;  // its previous attempt is still exiting
    queue.push_back(QueuedRunFromProto(r, now_micros));
    queue.back().min_nodes = resizing_.MinNodesNow(r);
    queued_runs.push_back(&r);
    queued_by_id[r.id()] = &r;
  }
  // Runs told to stop, or whose attempt has ended, that still hold their GPUs: they will leave.
  std::set<std::string> stopping = waiting_for_drain;
  for (const auto& run : active) {
    if (attempts_->StopSent(run.id(), run.resumption_index())) stopping.insert(run.id());
  }
  // Resumptions after a node fault first, on the spares; the ordinary pass sees what they took.
  // One that waits for preemptible work to leave a spare waits for that spare.
  const SparePlacement spares(nodes, index_.suspects(), now_micros);
  const PlacementDecision on_spares =
      spares.Resumptions(index_.index(), queue, queued_runs, state, stopping);
  std::vector<const Placement*> resumed;
  std::set<std::string> on_spare_ids;
  std::set<std::string> held_for_resumptions;  // nodes a resumption waits to start on
  for (const Placement& p : on_spares.placements) {
    on_spare_ids.insert(p.run_id);
    if (!p.after_preemption) {
      resumed.push_back(&p);
      continue;
    }
    for (const auto& a : p.nodes) held_for_resumptions.insert(a.node);
  }
  if (!on_spare_ids.empty()) {
    std::vector<QueuedRun> rest;
    std::vector<const v1::Run*> rest_runs;
    for (size_t i = 0; i < queue.size(); ++i) {
      if (!on_spare_ids.count(queue[i].run_id)) {
        rest.push_back(std::move(queue[i]));
        rest_runs.push_back(queued_runs[i]);
        continue;
      }
      const auto placed = std::find_if(resumed.begin(), resumed.end(), [&](const Placement* p) {
        return p->run_id == queue[i].run_id;
      });
      if (placed == resumed.end()) continue;
      state.running.push_back({.run_id = queue[i].run_id,
                               .priority = queue[i].priority,
                               .preemptible = queue[i].preemptible,
                               .started_at_micros = now_micros,
                               .nodes = (*placed)->nodes,
                               .team = queue[i].team});
    }
    queue = std::move(rest);
    queued_runs = std::move(rest_runs);
  }
  if (teams_) teams_->AssignShareRanks(queued_runs, queue);
  Placer placer(index_.index(), state);
  for (const auto& node : held_for_resumptions) placer.SetNodeSchedulable(node, false);
  const PlacementDecision decision = placer.PlaceQueue(queue, {.now_micros = now_micros});
  // What is left of the preemptible work may use the spares' idle GPUs.
  std::set<std::string> placed_ids;
  for (const Placement& p : decision.placements) placed_ids.insert(p.run_id);
  for (const Placement* p : resumed) placed_ids.insert(p->run_id);
  const std::vector<QueuedRun> left_preemptible = MayBorrowSpares(queue, queued, placed_ids);
  const PlacementDecision on_spares_preemptible =
      spares.Preemptible(left_preemptible, state, decision, held_for_resumptions);

  StopVictims(on_spares, decision, active, queued_by_id, stats);
  TESSERA_RETURN_IF_ERROR(StartPlacements(resumed, {&decision, &on_spares_preemptible},
                                          queued_by_id, nodes, ports, stats));
  Grow(active, placer, stats);
  return absl::OkStatus();
}

void SchedulingCycle::StopVictims(const PlacementDecision& for_resumptions,
                                  const PlacementDecision& ordinary,
                                  const std::vector<v1::Run>& active,
                                  const std::map<std::string, const v1::Run*>& queued_by_id,
                                  CycleStats& stats) {
  std::map<std::string, const v1::Run*> active_by_id;
  for (const auto& r : active) active_by_id[r.id()] = &r;
  for (const auto& p : for_resumptions.preemptions) {
    auto it = active_by_id.find(p.victim_run_id);
    if (it == active_by_id.end()) continue;
    spdlog::info("preempting run {} on a hot spare for run {}, resuming after a node fault",
                 it->second->name(), p.for_run_id);
    control_->StopAttempt(*it->second, v1::ATTEMPT_END_REASON_PREEMPTED,
                          "to free a hot spare for a run resuming after a node fault");
    ++stats.preempted;
  }
  for (const auto& p : ordinary.preemptions) {
    auto it = active_by_id.find(p.victim_run_id);
    if (it == active_by_id.end()) continue;
    spdlog::info("preempting run {} for run {}{}", it->second->name(), p.for_run_id,
                 p.reclaim ? " (reclaiming borrowed GPUs)" : "");
    std::string why = "for a higher-priority run";
    if (p.reclaim) {
      auto claimant = queued_by_id.find(p.for_run_id);
      const std::string to = claimant != queued_by_id.end() ? claimant->second->team() : "";
      const std::string& from = it->second->team();
      why = absl::StrCat("to return borrowed GPUs (",
                         from.empty() ? std::string("users in no team have no quota here")
                                      : absl::StrCat("team ", from, " is over its quota"),
                         "; ",
                         to.empty() ? std::string("users in no team need them")
                                    : absl::StrCat("team ", to, " needs them"),
                         ")");
    }
    control_->StopAttempt(*it->second, v1::ATTEMPT_END_REASON_PREEMPTED, why);
    ++stats.preempted;
  }
}

absl::Status SchedulingCycle::StartPlacements(
    const std::vector<const Placement*>& resumed,
    std::initializer_list<const PlacementDecision*> others,
    const std::map<std::string, const v1::Run*>& queued_by_id, const std::vector<v1::Node>& nodes,
    RendezvousPorts& ports, CycleStats& stats) {
  std::vector<const Placement*> starts = resumed;
  for (const PlacementDecision* decision : others) {
    for (const auto& p : decision->placements) {
      // A placement that needs victims to leave first starts in a later cycle, once they have.
      if (!p.after_preemption) starts.push_back(&p);
    }
  }
  // Computed once per cycle, and only when something starts.
  const auto drivers =
      starts.empty() ? std::map<std::string, std::string>{} : ClusterDriverVersions(nodes);
  for (const Placement* p : starts) {
    const v1::Run& run = *queued_by_id.at(p->run_id);
    v1::Attempt attempt;
    attempt.set_run_id(run.id());
    attempt.set_resumption_index(run.resumption_index());
    attempt.set_status(v1::RUN_STATUS_STARTING);
    PlacementToAttemptNodes(*p, attempt.mutable_nodes());
    attempt.set_placement_note(resizing_.Placed(run, attempt.nodes_size()));
    // A resumption names the spares it took (preemptible work on a spare is ordinary work).
    const bool resumption = std::find(resumed.begin(), resumed.end(), p) != resumed.end();
    for (const auto& n : attempt.nodes()) {
      const auto node = index_.by_name().find(n.node_name());
      if (resumption && node != index_.by_name().end() && node->second->spare()) {
        attempt.add_spare_nodes(n.node_name());
      }
    }
    TESSERA_RETURN_IF_ERROR(
        Start(run, std::move(attempt), index_.by_name(), drivers, ports, stats));
  }
  return absl::OkStatus();
}

void SchedulingCycle::Grow(const std::vector<v1::Run>& active, const Placer& placer,
                           CycleStats& stats) {
  const auto can_grow = [&](const v1::Run& run) {
    return !attempts_->StopSent(run.id(), run.resumption_index()) &&
           placer.CanGrow(run.id(), run.team(), RequestFromProto(run.spec().compute()));
  };
  for (const RunResizing::Growth& growth : resizing_.DueToGrow(active, can_grow)) {
    spdlog::info("run {} grows back to {} nodes: {}", growth.run->name(),
                 growth.run->spec().compute().nodes(), growth.why);
    control_->StopAttempt(*growth.run, v1::ATTEMPT_END_REASON_RESIZED, growth.why);
    ++stats.resized;
  }
}

absl::Status SchedulingCycle::Start(const v1::Run& run, v1::Attempt attempt,
                                    const std::map<std::string, const v1::Node*>& by_name,
                                    const std::map<std::string, std::string>& drivers,
                                    RendezvousPorts& ports, CycleStats& stats) {
  auto head = by_name.find(attempt.nodes(0).node_name());
  attempt.set_master_addr(HostOf(head != by_name.end() ? head->second->address() : ""));
  if (head != by_name.end()) {
    attempt.set_cluster(head->second->cluster());
    attempt.set_gpu_type(head->second->gpu_type());
  }
  attempt.set_master_port(
      ports.Choose(attempt.nodes(0).node_name(), run.id(), run.resumption_index()));
  // Before the placement is recorded: a run never starts without its owner's secrets.
  auto secrets = runs_->RunSecrets(run.id());
  if (absl::IsUnavailable(secrets.status())) return secrets.status();
  if (!secrets.ok()) {
    spdlog::warn("run {} stays queued: its owner's secrets cannot be had: {}", run.name(),
                 secrets.status().ToString());
    return absl::OkStatus();
  }
  auto placed = runs_->RecordAttempt(attempt);
  if (absl::IsUnavailable(placed.status())) return placed.status();
  if (!placed.ok()) {
    spdlog::warn("could not record the placement of run {}: {}", run.name(),
                 placed.status().ToString());
    return absl::OkStatus();
  }
  attempts_->Placed(*placed);
  ++stats.placed;
  if (metrics_ && run.has_updated_at()) {
    metrics_->Placed(clock_->Now() - FromProtoTime(run.updated_at()));
  }
  // The cycle's list left the parameters out; the recorded run has them.
  const v1::Run& full = *placed;
  int world = 0;
  for (const auto& n : attempt.nodes()) world += RanksOnNode(run, n, by_name);
  int first_rank = 0;
  for (const auto& n : attempt.nodes()) {
    const int local = RanksOnNode(run, n, by_name);
    v1::ControlMessage msg;
    msg.set_command_id(control_->NextCommandId());
    *msg.mutable_start_attempt() =
        StartCommand(full, attempt, n, world, local, first_rank, config_);
    const auto inventory = by_name.find(n.node_name());
    *msg.mutable_start_attempt()->mutable_preflight() =
        PreflightFor(n, inventory == by_name.end() ? nullptr : inventory->second, drivers, config_);
    for (const auto& s : *secrets) *msg.mutable_start_attempt()->add_secrets() = s;
    const bool delivered = workers_->Send(n.node_name(), msg);
    if (!delivered) {
      spdlog::warn("node {} has no worker stream here: the start goes with its first heartbeat",
                   n.node_name());
    }
    desired_->StartSent(n.node_name(), msg.start_attempt(), delivered);
    first_rank += local;
  }
  spdlog::info("placed run {} (attempt {}) on {} node(s)", run.name(), run.resumption_index(),
               attempt.nodes_size());
  return absl::OkStatus();
}

}  // namespace tessera::scheduler
