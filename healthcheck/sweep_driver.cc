#include "healthcheck/sweep_driver.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/timestamps.h"

namespace tessera::health {
namespace {

bool ResultIn(const v1::HealthCheckResult& r, v1::HealthCheckKind kind, const std::string& node,
              const std::vector<std::string>& group) {
  return r.kind() == kind && r.node_name() == node &&
         (group.empty() || std::vector<std::string>(r.group().begin(), r.group().end()) == group);
}

int CountResults(const std::vector<v1::HealthCheckResult>& results, v1::HealthCheckKind kind,
                 const std::string& node, const std::vector<std::string>& group) {
  int n = 0;
  for (const auto& r : results) n += ResultIn(r, kind, node, group) ? 1 : 0;
  return n;
}

}  // namespace

absl::StatusOr<std::vector<v1::Sweep>> SweepDriver::AdvanceRunning() {
  auto sweeps = store_->ListSweeps(200);
  if (!sweeps.ok()) {
    spdlog::warn("health: cannot read sweeps: {}", sweeps.status().ToString());
    return sweeps;
  }
  // Two sweeps measuring a node at once would measure each other (their canaries compete for
  // its cores and links) and could condemn it. Sweeps that started hold their nodes until they
  // finish; one not started yet starts once none of its nodes is held, oldest first.
  std::set<std::string> held;
  std::vector<const v1::Sweep*> waiting;
  for (const auto& s : *sweeps) {
    if (s.state() != v1::SWEEP_STATE_RUNNING) continue;
    if (s.phase() == 0) {
      waiting.push_back(&s);
      continue;
    }
    held.insert(s.node_names().begin(), s.node_names().end());
    AdvanceSweep(s);
  }
  std::stable_sort(waiting.begin(), waiting.end(), [](const v1::Sweep* a, const v1::Sweep* b) {
    return FromProtoTime(a->created_at()) < FromProtoTime(b->created_at());
  });
  for (const v1::Sweep* s : waiting) {
    const bool free = std::none_of(s->node_names().begin(), s->node_names().end(),
                                   [&](const std::string& n) { return held.count(n) > 0; });
    // A waiting sweep holds its nodes too: a newer one never starts ahead of it.
    held.insert(s->node_names().begin(), s->node_names().end());
    if (free) AdvanceSweep(*s);
  }
  return sweeps;
}

void SweepDriver::Dispatch(v1::Sweep& sweep, const std::vector<CanaryDispatch>& dispatches) {
  for (const auto& d : dispatches) {
    v1::DispatchToWorkerRequest req;
    req.set_node_name(d.node);
    *req.mutable_start_canary() = d.canary;
    req.set_timeout_seconds(absl::ToDoubleSeconds(config_.dispatch_timeout));
    absl::Status st = scheduler_->DispatchToWorker(req);
    if (st.ok()) continue;
    if (absl::IsDeadlineExceeded(st)) {
      // Handed over but not acknowledged in time (a loaded or frozen worker): the canary may
      // still run and report. The stage's deadline decides, not a late acknowledgement.
      spdlog::warn("health: sweep {}: {} did not acknowledge its canary: {}", sweep.id(), d.node,
                   std::string(st.message()));
      continue;
    }
    v1::HealthCheckResult r;
    r.set_sweep_id(sweep.id());
    r.set_node_name(d.node);
    r.set_kind(d.canary.kind());
    *r.mutable_group() = d.canary.group();
    r.set_step(d.canary.step());
    if (absl::IsUnavailable(st)) {
      // The worker is not connected (or the scheduler is away): nothing was measured, and the
      // node's lease, not this sweep, decides whether it is lost (anomaly.h, NotMeasured).
      r.set_verdict(v1::HEALTH_VERDICT_UNSPECIFIED);
      r.set_error(absl::StrCat("the canary could not be handed to the node: ", st.message()));
    } else {
      // The worker refused it (it could not start the canary): that is the node's result.
      r.set_verdict(v1::HEALTH_VERDICT_ERROR);
      r.set_error(absl::StrCat("the canary could not start: ", st.message()));
    }
    *r.mutable_started_at() = ToProtoTime(clock_->Now());
    *r.mutable_finished_at() = r.started_at();
    (void)store_->AddResult(r);
  }
}

// Every member of every group that has no result of `kind` gets a TIMEOUT result (compute stress
// comes in single-node groups).
void SweepDriver::RecordTimeouts(const v1::Sweep& sweep, v1::HealthCheckKind kind,
                                 const std::vector<std::vector<std::string>>& groups, int pass,
                                 std::vector<v1::HealthCheckResult>& results) {
  const bool compute = kind == v1::HEALTH_CHECK_KIND_COMPUTE_STRESS;
  for (const auto& group : groups) {
    for (const auto& node : group) {
      const std::vector<std::string> match = compute ? std::vector<std::string>{} : group;
      if (CountResults(results, kind, node, match) >= pass) continue;
      v1::HealthCheckResult r;
      r.set_sweep_id(sweep.id());
      r.set_node_name(node);
      r.set_kind(kind);
      for (const auto& m : group) r.add_group(m);
      r.set_verdict(v1::HEALTH_VERDICT_TIMEOUT);
      r.set_error("no result before the sweep's deadline");
      *r.mutable_finished_at() = ToProtoTime(clock_->Now());
      auto added = store_->AddResult(r);
      results.push_back(added.ok() ? *added : r);
    }
  }
}

// A sweep runs in stages: the compute stress rounds, then the all-reduce rounds. `phase` is the
// 1-based stage running (0: none yet). A stage ends when every result it expects is in or its
// deadline passed (the missing ones are recorded as timeouts); then the next is dispatched.
void SweepDriver::AdvanceSweep(v1::Sweep sweep) {
  const std::vector<std::string> nodes(sweep.node_names().begin(), sweep.node_names().end());
  auto results = store_->ListResults({}, sweep.id(), 0);
  auto known = NodesByName(*scheduler_);
  if (!results.ok() || !known.ok()) return;  // try again next tick
  struct Stage {
    v1::HealthCheckKind kind;
    std::vector<std::vector<std::string>> groups;  // compute: single-node groups
    int pass = 1;  // the results each member has once the stage is done
  };
  // Nodes that share a machine take turns — twice, the second time starting halfway, each node
  // keeping its better figure, so that a dip of the machine's own speed during the sweep does not
  // fall on one node's every measurement; a third time, starting a quarter of the way, when the
  // first two turns were noisy (decided once they ended, and kept in the sweep).
  const auto compute_rounds = ComputeRounds(nodes, *known);
  const size_t n_rounds = compute_rounds.size();
  const int two_passes = n_rounds > 1 ? 2 : 1;
  const auto stages_of = [&](int passes) {
    std::vector<Stage> stages;
    for (int pass = 1; pass <= passes; ++pass) {
      const size_t offset = pass == 1 ? 0 : pass == 2 ? n_rounds / 2 : n_rounds / 4;
      for (size_t i = 0; i < n_rounds; ++i) {
        Stage s{v1::HEALTH_CHECK_KIND_COMPUTE_STRESS, {}, pass};
        for (const auto& n : compute_rounds[(i + offset) % n_rounds]) s.groups.push_back({n});
        stages.push_back(std::move(s));
      }
    }
    for (auto& round : Rounds(RingPairs(nodes))) {
      stages.push_back({v1::HEALTH_CHECK_KIND_ALLREDUCE, std::move(round), 1});
    }
    return stages;
  };
  std::vector<Stage> stages =
      stages_of(two_passes == 2 && sweep.compute_passes() == 3 ? 3 : two_passes);
  auto dispatch = [&](size_t index) {
    const Stage& stage = stages[index];
    neighbours_->Observe(sweep);
    if (stage.kind == v1::HEALTH_CHECK_KIND_COMPUTE_STRESS) {
      std::vector<std::string> members;
      for (const auto& g : stage.groups) members.push_back(g[0]);
      Dispatch(sweep, ComputePhase(sweep.id(), members, config_.canary));
    } else {
      const int span = std::max(1, config_.port_span);
      const RendezvousPorts ports{config_.port_base, span,
                                  static_cast<int>(random_->Uniform(static_cast<uint64_t>(span)))};
      Dispatch(sweep, AllReducePhase(sweep.id(), stage.groups, *known, ports, config_.canary));
    }
    const absl::Duration timeout = stage.kind == v1::HEALTH_CHECK_KIND_COMPUTE_STRESS
                                       ? config_.canary.compute_timeout
                                       : config_.canary.allreduce_timeout;
    sweep.set_phase(static_cast<int>(index) + 1);
    *sweep.mutable_deadline() = ToProtoTime(clock_->Now() + timeout + absl::Seconds(5));
    (void)store_->UpdateSweep(sweep);
  };
  if (sweep.phase() == 0) {
    dispatch(0);
    return;
  }
  const size_t index = static_cast<size_t>(sweep.phase() - 1);
  if (index >= stages.size()) {  // a confirmation step
    AdvanceConfirmation(sweep, *results, static_cast<int>(index - stages.size()) + 1,
                        static_cast<int>(stages.size()));
    return;
  }
  bool complete = true;
  const Stage& stage = stages[index];
  for (const auto& g : stage.groups) {
    for (const auto& m : g) {
      const std::vector<std::string> match =
          stage.kind == v1::HEALTH_CHECK_KIND_COMPUTE_STRESS ? std::vector<std::string>{} : g;
      complete = complete && CountResults(*results, stage.kind, m, match) >= stage.pass;
    }
  }
  const bool due = sweep.has_deadline() && clock_->Now() >= FromProtoTime(sweep.deadline());
  if (!complete && !due) return;
  RecordTimeouts(sweep, stage.kind, stage.groups, stage.pass, *results);
  const bool compute = stage.kind == v1::HEALTH_CHECK_KIND_COMPUTE_STRESS;
  if (two_passes == 2 && sweep.compute_passes() == 0 &&
      index + 1 == 2 * n_rounds) {  // the second turn ended: is a third one needed?
    const auto anomalies = FindAnomalies(nodes, {}, *results, config_.anomaly);
    std::vector<std::string> condemned;
    for (const auto& a : anomalies) condemned.push_back(a.node);
    sweep.set_compute_passes(
        ComputePassesAfter(nodes, *results, config_.anomaly.confirmation, condemned));
    stages = stages_of(sweep.compute_passes());  // `stage` is gone from here on
    // A node already condemned (an error, a hang) is taken out before the third turn, not after.
    if (sweep.compute_passes() == 3) remediation_->Remediate(sweep, anomalies);
  }
  const bool last_compute =
      compute && (index + 1 == stages.size() ||
                  stages[index + 1].kind != v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  if (last_compute && index + 1 < stages.size()) {
    // A node the compute stress test already condemns is taken out now, while the all-reduce
    // rounds go on: a run waiting on it resumes elsewhere sooner.
    remediation_->Remediate(sweep, FindAnomalies(nodes, {}, *results, config_.anomaly));
    (void)store_->UpdateSweep(sweep);
  }
  if (index + 1 < stages.size()) {
    dispatch(index + 1);
    return;
  }
  AdvanceConfirmation(sweep, *results, 0, static_cast<int>(stages.size()));
}

ConfirmationPlan SweepDriver::PlanFor(const v1::Sweep& sweep,
                                      const std::vector<v1::HealthCheckResult>& results) const {
  const std::vector<std::string> nodes(sweep.node_names().begin(), sweep.node_names().end());
  const auto& confirmation = config_.anomaly.confirmation;
  if (!confirmation.enabled) return {};
  // Nodes condemned outright (errors, timeouts, under half speed) are neither suspects nor peers.
  std::vector<std::string> condemned;
  for (const auto& a : FindAnomalies(nodes, {}, results, config_.anomaly)) {
    condemned.push_back(a.node);
  }
  std::vector<std::string> peers;
  auto suspects = FindSuspects(nodes, results, confirmation, condemned, &peers);
  std::map<std::string, SuspectOutcome> carried;
  if (!sweep.follows_sweep_id().empty()) {
    if (const auto earlier = FinishedPlan(sweep.follows_sweep_id())) {
      CarryUndecided(*earlier, confirmation, &suspects, &peers, &carried);
    }
  }
  return PlanConfirmation(suspects, peers, results, confirmation, carried);
}

std::optional<ConfirmationPlan> SweepDriver::FinishedPlan(const std::string& sweep_id) const {
  {
    absl::MutexLock lock(&plans_mu_);
    if (const auto it = finished_plans_.find(sweep_id); it != finished_plans_.end()) {
      return it->second;
    }
  }
  auto sweep = store_->GetSweep(sweep_id);
  if (!sweep.ok() || sweep->state() != v1::SWEEP_STATE_FINISHED) return std::nullopt;
  auto results = store_->ListResults({}, sweep_id, 0);
  if (!results.ok()) return std::nullopt;
  v1::Sweep plain = *sweep;
  plain.clear_follows_sweep_id();  // a follow-up is never followed up: no deeper chain
  ConfirmationPlan plan = PlanFor(plain, *results);
  absl::MutexLock lock(&plans_mu_);
  if (finished_plans_.size() >= 16) finished_plans_.clear();  // a follow-up needs one at a time
  finished_plans_[sweep_id] = plan;
  return plan;
}

// Confirmation step `step` (0: none yet) has its result or is past its deadline (then recorded
// as a timeout); dispatches the next step of the plan, or finishes the sweep.
void SweepDriver::AdvanceConfirmation(v1::Sweep& sweep, std::vector<v1::HealthCheckResult>& results,
                                      int step, int fixed_stages) {
  ConfirmationPlan plan = PlanFor(sweep, results);
  if (step > 0 && plan.next_step == step) {  // still waiting for it
    const bool due = sweep.has_deadline() && clock_->Now() >= FromProtoTime(sweep.deadline());
    if (!due) return;
    v1::HealthCheckResult r;
    r.set_sweep_id(sweep.id());
    r.set_node_name(plan.next_node);
    r.set_kind(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
    r.add_group(plan.next_node);
    r.set_step(step);
    r.set_verdict(v1::HEALTH_VERDICT_TIMEOUT);
    r.set_error("no result before the sweep's deadline");
    *r.mutable_finished_at() = ToProtoTime(clock_->Now());
    auto added = store_->AddResult(r);
    results.push_back(added.ok() ? *added : r);
    plan = PlanFor(sweep, results);  // with the timeout
  }
  if (plan.next_node.empty()) {
    FinishSweep(sweep, results, plan);
    return;
  }
  auto dispatches = ComputePhase(sweep.id(), {plan.next_node}, config_.canary);
  for (auto& d : dispatches) d.canary.set_step(plan.next_step);
  Dispatch(sweep, dispatches);
  sweep.set_phase(fixed_stages + plan.next_step);
  // Each confirmation step is one more result the sweep waits for.
  sweep.set_expected_results(
      ExpectedResults({sweep.node_names().begin(), sweep.node_names().end()}) + plan.next_step);
  *sweep.mutable_deadline() =
      ToProtoTime(clock_->Now() + config_.canary.compute_timeout + absl::Seconds(5));
  (void)store_->UpdateSweep(sweep);
}

void SweepDriver::FinishSweep(v1::Sweep& sweep, const std::vector<v1::HealthCheckResult>& results,
                              const ConfirmationPlan& plan) {
  const std::vector<std::string> nodes(sweep.node_names().begin(), sweep.node_names().end());
  auto anomalies = FindAnomalies(nodes, RingPairs(nodes), results, config_.anomaly);
  std::optional<ConfirmationPlan> earlier;
  if (!sweep.follows_sweep_id().empty()) earlier = FinishedPlan(sweep.follows_sweep_id());
  const ConfirmationVerdicts verdicts =
      JudgeConfirmation(plan, earlier ? &*earlier : nullptr, config_.anomaly.confirmation);
  sweep.clear_suspects();
  sweep.clear_inconclusive_nodes();
  sweep.clear_repeat_nodes();
  for (const auto& [node, outcome] : plan.outcomes) {
    std::string line = DescribeOutcome(node, outcome);
    if (std::find(verdicts.repeat.begin(), verdicts.repeat.end(), node) != verdicts.repeat.end()) {
      absl::StrAppend(&line, sweep.follows_sweep_id().empty()
                                 ? "; not cordoned on one sweep: a follow-up sweep measures it "
                                   "again, afresh"
                                 : "; not cordoned on one sweep: the next sweep measures it again");
    }
    sweep.add_suspects(std::move(line));
  }
  for (const auto& node : verdicts.repeat) sweep.add_repeat_nodes(node);
  for (const auto& node : verdicts.inconclusive) sweep.add_inconclusive_nodes(node);
  anomalies.insert(anomalies.end(), verdicts.anomalies.begin(), verdicts.anomalies.end());
  RecordUnmeasured(sweep, results, anomalies);
  sweep.set_state(v1::SWEEP_STATE_FINISHED);
  *sweep.mutable_finished_at() = ToProtoTime(clock_->Now());
  remediation_->Remediate(sweep, anomalies, FabricFaults(nodes, results, verdicts));
  neighbours_->Forget(sweep.id());
  if (auto st = store_->UpdateSweep(sweep); !st.ok()) {
    spdlog::warn("health: sweep {} not saved: {}", sweep.id(), st.ToString());
    return;
  }
  if (metrics_) metrics_->SweepFinished(sweep);
  spdlog::info("sweep {} finished: {}", sweep.id(),
               sweep.findings().empty() ? std::string("every node passed")
                                        : absl::StrJoin(sweep.findings(), "; "));
  remediation_->ReturnToService(sweep);
  FollowUp(sweep);
}

// A node the sweep could not reach for some check, and that nothing else condemns, is neither
// passed nor failed: it is listed as inconclusive (measured again by the follow-up once it is
// back) with a finding that says why, and the sweep does not count as a pass for it.
void SweepDriver::RecordUnmeasured(v1::Sweep& sweep,
                                   const std::vector<v1::HealthCheckResult>& results,
                                   const std::vector<Anomaly>& anomalies) {
  const std::vector<std::string> nodes(sweep.node_names().begin(), sweep.node_names().end());
  for (const auto& [node, why] : UnmeasuredNodes(nodes, results)) {
    const bool condemned = std::any_of(anomalies.begin(), anomalies.end(),
                                       [&](const Anomaly& a) { return a.node == node; });
    if (condemned) continue;
    const auto& listed = sweep.inconclusive_nodes();
    if (std::find(listed.begin(), listed.end(), node) == listed.end()) {
      sweep.add_inconclusive_nodes(node);
    }
    sweep.add_findings(absl::StrCat(kNotMeasuredPrefix, node, ": ", why,
                                    "; not judged by this sweep (its lease decides whether it is "
                                    "lost), measured again once it is back"));
  }
}

std::vector<NamedFabricFault> SweepDriver::FabricFaults(
    const std::vector<std::string>& nodes, const std::vector<v1::HealthCheckResult>& results,
    const ConfirmationVerdicts& verdicts) const {
  const auto groups = RingPairs(nodes);
  const std::vector<GroupJudgement> judged = JudgeGroups(groups, results, config_.anomaly);
  // Most sweeps: every pair passed, and nothing more is asked of the scheduler.
  if (std::none_of(judged.begin(), judged.end(), [](const auto& j) { return j.bad; })) return {};
  // Without the nodes' labels nothing names a switch; each node's own verdict stands.
  auto known = NodesByName(*scheduler_);
  if (!known.ok()) return {};
  std::set<std::string> condemned_before;  // by compute stress and its confirmation
  for (const auto& a : FindAnomalies(nodes, {}, results, config_.anomaly)) {
    condemned_before.insert(a.node);
  }
  for (const auto& a : verdicts.anomalies) condemned_before.insert(a.node);
  for (const auto& n : verdicts.repeat) condemned_before.insert(n);
  return FindFabricFaults(nodes, groups, judged, *known, condemned_before);
}

// Inconclusive nodes, and nodes found slow that must be found so twice, are measured again at
// once, by one follow-up sweep with the same peers (a follow-up's own wait for the next sweep
// that includes them).
void SweepDriver::FollowUp(v1::Sweep& finished) {
  if ((finished.inconclusive_nodes().empty() && finished.repeat_nodes().empty()) ||
      !finished.follows_sweep_id().empty()) {
    return;
  }
  auto known = NodesByName(*scheduler_);
  if (!known.ok()) return;
  std::vector<std::string> online;
  for (const auto& n : finished.node_names()) {
    auto it = known->find(n);
    if (it != known->end() && it->second.liveness() == v1::NODE_LIVENESS_ONLINE) {
      online.push_back(n);
    }
  }
  // Nothing to measure again while every node it is for is away (one not measured, say): the
  // next sweep that includes them does it.
  const auto is_online = [&](const std::string& n) {
    return std::find(online.begin(), online.end(), n) != online.end();
  };
  if (std::none_of(finished.repeat_nodes().begin(), finished.repeat_nodes().end(), is_online) &&
      std::none_of(finished.inconclusive_nodes().begin(), finished.inconclusive_nodes().end(),
                   is_online)) {
    spdlog::info("health: no follow-up of sweep {}: the nodes to measure again are not online",
                 finished.id());
    return;
  }
  std::vector<std::string> what;
  if (!finished.repeat_nodes().empty()) {
    what.push_back(absl::StrCat("found slow (", absl::StrJoin(finished.repeat_nodes(), ", "), ")"));
  }
  if (!finished.inconclusive_nodes().empty()) {
    what.push_back(absl::StrCat("left inconclusive (",
                                absl::StrJoin(finished.inconclusive_nodes(), ", "), ")"));
  }
  auto next = launcher_->CreateSweep(
      {.trigger = finished.trigger(),
       .nodes = online,
       .requested_by = finished.requested_by(),
       .run_name = finished.run_name(),
       .run_nodes = {finished.run_nodes().begin(), finished.run_nodes().end()},
       .suspect_node = finished.suspect_node(),
       .trigger_detail = absl::StrCat("measuring again what sweep ", finished.id(), " ",
                                      absl::StrJoin(what, " and "))});
  if (!next.ok()) {
    spdlog::warn("health: no follow-up of sweep {}: {}", finished.id(), next.status().ToString());
    return;
  }
  next->set_follows_sweep_id(finished.id());
  (void)store_->UpdateSweep(*next);
}

}  // namespace tessera::health
