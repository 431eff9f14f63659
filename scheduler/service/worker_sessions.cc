#include "scheduler/service/worker_sessions.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "proto/policy/node_terms.h"
#include "proto/policy/preflight.h"
#include "scheduler/service/node_events.h"
#include "scheduler/service/preflight_cordon.h"
#include "services/common/node_labels.h"
#include "services/store/cas_retry.h"

namespace tessera::scheduler {
namespace {

// A node's cluster and GPU type are what its first registration said, unless the terms of its
// key or join token fix them (HoldToTerms held it to those): a node cannot move itself into another
// pool at its next registration. An operator moves one by removing it while it is offline
// (RemoveNode, `mcli admin remove-node`) or by giving it a join token with terms.
absl::Status HoldToFirstWord(const v1::Node& before, const v1::Node& offered,
                             const v1::NodeTerms& terms) {
  const auto refuse = [&](const std::string& what, const std::string& was,
                          const std::string& said) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", offered.name(), " registered with ", what, " ", said, "; it is in ", what, " ",
        was,
        " since it first registered, and a node cannot move itself (an operator removes it "
        "while it is offline, `mcli admin remove-node ",
        offered.name(),
        "`, or gives it a join token or node key whose terms say where it belongs)"));
  };
  if (terms.cluster().empty() && offered.cluster() != before.cluster()) {
    return refuse("cluster", before.cluster(), offered.cluster());
  }
  if (terms.gpu_type().empty() && offered.gpu_type() != before.gpu_type()) {
    return refuse("GPU type", before.gpu_type(), offered.gpu_type());
  }
  return absl::OkStatus();
}

// A registering node's labels over those it had: the labels a person set stay as they were
// (whatever the node says), those the node no longer sends stay too, and the rest are the
// node's. The record of which a person set is the old one, never the node's.
void KeepLabelsOfPeople(const NodeLabels& before, NodeLabels& offered) {
  offered.erase(kOperatorLabelKeysLabel);
  for (const std::string& key : OperatorLabelKeys(before)) {
    auto it = before.find(key);
    if (it != before.end()) offered[key] = it->second;
  }
  for (const auto& [k, v] : before) {
    if (!offered.count(k)) offered[k] = v;
  }
}

}  // namespace

WorkerSessions::WorkerSessions(
    std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
    std::shared_ptr<AttemptTracker> attempts, std::shared_ptr<AttemptControl> control,
    std::shared_ptr<LeaseTable> leases, std::shared_ptr<DesiredAttempts> desired,
    std::shared_ptr<Clock> clock, SchedulerConfig config, std::shared_ptr<SchedulerMetrics> metrics,
    std::shared_ptr<store::JoinTokenStore> join_tokens)
    : nodes_(std::move(nodes)),
      runs_(std::move(runs)),
      attempts_(std::move(attempts)),
      control_(std::move(control)),
      leases_(std::move(leases)),
      desired_(std::move(desired)),
      clock_(std::move(clock)),
      config_(config),
      metrics_(std::move(metrics)),
      join_tokens_(std::move(join_tokens)) {}

absl::StatusOr<v1::Registered> WorkerSessions::RegisterWorker(const v1::RegisterWorker& reg,
                                                              const v1::NodeTerms& key_terms) {
  const v1::Node& offered = reg.node();
  if (offered.name().empty()) return absl::InvalidArgumentError("register.node.name: required");
  if (offered.gpu_count() < 0 || offered.gpu_count() > 64) {
    return absl::InvalidArgumentError("register.node.gpu_count: must be between 0 and 64");
  }
  TESSERA_RETURN_IF_ERROR(RefuseUnfenced(reg));
  v1::RegisterWorker held = reg;
  TESSERA_ASSIGN_OR_RETURN(const v1::NodeTerms terms, HoldToTerms(*held.mutable_node(), key_terms));
  v1::Registered out;
  *out.mutable_lease_duration() = ToProtoDuration(config_.lease);
  *out.mutable_heartbeat_interval() = ToProtoDuration(config_.heartbeat_interval);
  TESSERA_RETURN_IF_ERROR(SaveRegistration(held, terms, out));
  leases_->Grant(offered.name());
  TESSERA_RETURN_IF_ERROR(StopOrphans(held));
  return out;
}

absl::Status WorkerSessions::RefuseUnfenced(const v1::RegisterWorker& reg) const {
  const absl::Duration wait = leases_->UntilFenced(reg.node().name());
  if (wait <= absl::ZeroDuration()) return absl::OkStatus();
  int ranks = 0;
  bool preparing = false;
  for (const auto& a : reg.attempts()) {
    ranks += a.running_ranks_size();
    preparing = preparing || a.preparing();
  }
  // A worker started afresh killed its predecessor's ranks: nothing of then runs.
  if (ranks == 0 && !preparing) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("node ", reg.node().name(), " was declared lost and still runs ",
                   preparing && ranks == 0 ? std::string("an attempt's preparation")
                                           : absl::StrCat(ranks, " rank(s)"),
                   " it started before; its lease fences them within ", absl::FormatDuration(wait),
                   ": register again then"));
}

absl::StatusOr<std::pair<v1::NodeTerms, std::string>> WorkerSessions::TermsOf(
    const std::string& node, const v1::NodeTerms& key_terms) {
  if (HasNodeTerms(key_terms)) return std::pair{key_terms, std::string("its node key")};
  if (join_tokens_ == nullptr) return std::pair{v1::NodeTerms(), std::string()};
  // A key made by a join before keys carried their token's terms.
  auto token = join_tokens_->FindLastUsedJoinToken(node);
  if (absl::IsNotFound(token.status())) return std::pair{v1::NodeTerms(), std::string()};
  if (!token.ok()) return token.status();
  return std::pair{token->terms(), absl::StrCat("join token ", token->id())};
}

absl::StatusOr<v1::NodeTerms> WorkerSessions::HoldToTerms(v1::Node& node,
                                                          const v1::NodeTerms& key_terms) {
  TESSERA_ASSIGN_OR_RETURN(auto found, TermsOf(node.name(), key_terms));
  const auto& [terms, source] = found;
  if (config_.require_node_terms && (terms.cluster().empty() || terms.gpu_type().empty())) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", node.name(), " has no terms fixing its cluster and GPU type",
        source.empty() ? "" : absl::StrCat(" (", source, " leaves them open)"),
        ", and this scheduler takes no node's own word for them (--require-node-terms): an "
        "admin gives it a join token or node key with --cluster and --gpu-type"));
  }
  const auto refuse = [&](const std::string& what, const std::string& allowed,
                          const std::string& said) {
    return absl::PermissionDeniedError(
        absl::StrCat("node ", node.name(), " is held to the terms of ", source, ", which allow ",
                     what, " ", allowed, "; it registered with ", said,
                     " (an admin makes a new token or key to change them)"));
  };
  if (!terms.cluster().empty() && node.cluster() != terms.cluster()) {
    return refuse("cluster", terms.cluster(), "cluster " + node.cluster());
  }
  if (!terms.gpu_type().empty() && node.gpu_type() != terms.gpu_type()) {
    return refuse("GPU type", terms.gpu_type(), "GPU type " + node.gpu_type());
  }
  if (terms.max_gpus() > 0 && node.gpu_count() > terms.max_gpus()) {
    return refuse("at most", absl::StrCat(terms.max_gpus(), " GPUs"),
                  absl::StrCat(node.gpu_count(), " GPUs"));
  }
  for (const auto& [key, value] : terms.labels()) (*node.mutable_labels())[key] = value;
  return terms;
}

absl::Status WorkerSessions::SaveRegistration(const v1::RegisterWorker& reg,
                                              const v1::NodeTerms& terms, v1::Registered& out) {
  const absl::Time now = clock_->Now();
  // What the worker says of its node, live from now on.
  auto offered = [&] {
    v1::Node node = reg.node();
    // Whether it is a hot spare is the scheduler's word, never the node's own.
    node.clear_spare();
    node.clear_spare_status();
    node.set_liveness(v1::NODE_LIVENESS_ONLINE);
    *node.mutable_last_heartbeat_at() = ToProtoTime(now);
    *node.mutable_lease_expires_at() = ToProtoTime(now + config_.lease);
    return node;
  };
  auto created = [&](std::vector<v1::NodeEvent>& events) -> absl::StatusOr<v1::Node> {
    v1::Node node = offered();
    node.mutable_labels()->erase(kOperatorLabelKeysLabel);  // no person has labelled it yet
    node.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
    node.set_health(v1::NODE_HEALTH_HEALTHY);
    *node.mutable_registered_at() = ToProtoTime(now);
    node.set_incarnation(1);
    events.push_back(SchedulerNodeEvent(
        node.name(), v1::NODE_EVENT_TYPE_REGISTERED,
        absl::StrCat("worker ", reg.process_id(), " registered a new node"), now));
    return node;
  };
  auto reregistered = [&](v1::Node& node,
                          std::vector<v1::NodeEvent>& events) -> absl::StatusOr<store::NodeChange> {
    const v1::Node existing = std::move(node);
    node = offered();
    TESSERA_RETURN_IF_ERROR(HoldToFirstWord(existing, node, terms));
    // What operators and the health API decided stays; the hardware description is the worker's.
    node.set_admin_state(existing.admin_state());
    node.set_health(existing.health());
    node.set_status_reason(existing.status_reason());
    node.set_spare(existing.spare());
    node.set_spare_status(existing.spare_status());
    *node.mutable_registered_at() = existing.registered_at();
    KeepLabelsOfPeople(existing.labels(), *node.mutable_labels());
    node.set_incarnation(existing.incarnation() + 1);
    const auto type = existing.liveness() == v1::NODE_LIVENESS_LOST
                          ? v1::NODE_EVENT_TYPE_RECOVERED
                          : v1::NODE_EVENT_TYPE_REGISTERED;
    events.push_back(
        SchedulerNodeEvent(node.name(), type,
                           absl::StrCat("worker ", reg.process_id(), " registered (incarnation ",
                                        node.incarnation(), ")"),
                           now));
    return store::NodeChange::kWrite;
  };
  TESSERA_ASSIGN_OR_RETURN(
      const v1::Node stored,
      store::UpsertNodeWithRetry(*nodes_, reg.node().name(), created, reregistered));
  out.set_incarnation(stored.incarnation());
  spdlog::info("node {} registered ({} GPUs, incarnation {})", stored.name(), stored.gpu_count(),
               stored.incarnation());
  return absl::OkStatus();
}

absl::Status WorkerSessions::StopOrphans(const v1::RegisterWorker& reg) {
  // Attempts the worker still runs but the control plane does not place there are orphans
  // (the run ended or moved while the worker was away): stop them.
  if (reg.attempts_size() == 0) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(auto active,
                           runs_->ListRuns({v1::RUN_STATUS_STARTING, v1::RUN_STATUS_RUNNING,
                                            v1::RUN_STATUS_TERMINATING}));
  for (const auto& local : reg.attempts()) {
    bool known = false;
    for (const auto& run : active) {
      if (run.id() != local.run_id() || run.resumption_index() != local.resumption_index())
        continue;
      for (const auto& n : run.nodes()) known = known || n.node_name() == reg.node().name();
    }
    if (known) continue;
    control_->SendStop(reg.node().name(), local.run_id(), local.resumption_index(),
                       "orphaned attempt: it no longer runs on this node");
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::LeaseRenewed> WorkerSessions::Heartbeat(const std::string& node_name,
                                                           const v1::Heartbeat& hb) {
  // In memory only: the database is not on a lease's path (lease_table.h).
  TESSERA_RETURN_IF_ERROR(leases_->Renew(node_name));
  v1::LeaseRenewed out;
  // For people: the worker counts its lease from when it sent the heartbeat (lease_tracker.h).
  *out.mutable_expires_at() = ToProtoTime(clock_->Now() + config_.lease);
  out.set_heartbeat_sequence(hb.sequence());
  ReconcileFromHeartbeat(node_name, hb);
  return out;
}

void WorkerSessions::ReconcileFromHeartbeat(const std::string& node, const v1::Heartbeat& hb) {
  // Each heartbeat says what the worker's ranks are doing. A report this instance missed is
  // recovered from it, so an attempt never waits forever for a STARTED or FINISHED that went to a
  // dead scheduler.
  for (const auto& local : hb.attempts()) {
    const auto seen = attempts_->ReportsFrom(local.run_id(), local.resumption_index(), node);
    if (!seen) {
      // An ended attempt: once its ranks are gone here, the node no longer drains it. One not
      // active here yet: the next cycle learns it, the next heartbeat retries.
      if (local.running_ranks_size() == 0) {
        attempts_->NodeDrained(local.run_id(), local.resumption_index(), node);
      } else if (attempts_->Superseded(local.run_id(), local.resumption_index()) &&
                 desired_->StopDue(node, local.run_id(), local.resumption_index())) {
        // Its stop was lost, or went to an instance that is gone: an older attempt's ranks
        // must never run beside a newer one's.
        spdlog::warn(
            "node {} still runs attempt {} of run {}, which is over: its stop is sent again", node,
            local.resumption_index(), local.run_id());
        control_->SendStop(node, local.run_id(), local.resumption_index(),
                           "this attempt is over (its stop is sent again)");
      }
      continue;
    }
    if (local.running_ranks_size() > 0 && !seen->finished) {
      const auto stop_sent = attempts_->StopSentAt(local.run_id(), local.resumption_index());
      if (stop_sent && clock_->Now() - *stop_sent >= ResendAfter(config_) &&
          desired_->StopDue(node, local.run_id(), local.resumption_index())) {
        spdlog::warn(
            "node {} still runs attempt {} of run {}, which is stopping: its stop is sent "
            "again",
            node, local.resumption_index(), local.run_id());
        control_->SendStop(node, local.run_id(), local.resumption_index(),
                           "the attempt is stopping (its stop is sent again)");
      }
    }
    v1::AttemptUpdate update;
    update.set_run_id(local.run_id());
    update.set_resumption_index(local.resumption_index());
    if (local.lost()) {
      if (seen->finished) continue;
      update.set_phase(v1::ATTEMPT_PHASE_LOST);
      *update.mutable_rank_exits() = local.exited_ranks();
      update.set_detail("the worker restarted and killed the ranks it found");
    } else if (local.running_ranks_size() > 0) {
      if (seen->started) continue;
      update.set_phase(v1::ATTEMPT_PHASE_STARTED);
    } else if (local.exited_ranks_size() > 0) {
      // Its FINISHED is on its way once the ranks' last lines are shipped: not missed.
      if (seen->finished || local.logs_pending()) continue;
      update.set_phase(v1::ATTEMPT_PHASE_FINISHED);
      *update.mutable_rank_exits() = local.exited_ranks();
      update.set_detail("recovered from a heartbeat");
    } else {
      continue;
    }
    if (auto st = OnAttemptUpdate(node, update); !st.ok()) {
      spdlog::warn("reconciling node {} from its heartbeat: {}", node, st.ToString());
    }
  }
  ResendStarts(node, hb);
}

void WorkerSessions::ResendStarts(const std::string& node, const v1::Heartbeat& hb) {
  for (auto& start : desired_->StartsDue(node, hb)) {
    if (!attempts_->ReportsFrom(start.run_id(), start.resumption_index(), node)) {
      desired_->Forget(start.run_id(), start.resumption_index());  // it ended meanwhile
      continue;
    }
    spdlog::warn("node {} does not run attempt {} of run {} it was told to start: sending it again",
                 node, start.resumption_index(), start.run_name());
    v1::ControlMessage msg;
    msg.set_command_id(control_->NextCommandId());
    *msg.mutable_start_attempt() = std::move(start);
    control_->Send(node, msg);
  }
}

absl::Status WorkerSessions::OnAttemptUpdate(const std::string& node,
                                             const v1::AttemptUpdate& update) {
  if (update.phase() == v1::ATTEMPT_PHASE_PREPARING && update.detail().empty()) {
    return absl::OkStatus();
  }
  if (!attempts_->IsActive(update.run_id())) {
    // Placed before this instance started (a restart or a takeover): learn the active runs now
    // rather than drop the report.
    TESSERA_ASSIGN_OR_RETURN(auto active,
                             runs_->ListRuns({v1::RUN_STATUS_STARTING, v1::RUN_STATUS_RUNNING,
                                              v1::RUN_STATUS_TERMINATING}));
    attempts_->LearnActive(active);
  }
  if (update.phase() == v1::ATTEMPT_PHASE_PREPARING) {
    // What the node is doing before the ranks can start (pulling the image): for people, and
    // only on an attempt placed on this node now (a node may not write into others' runs).
    if (!attempts_->PlacedOn(update.run_id(), update.resumption_index(), node)) {
      spdlog::warn(
          "node {} sent a note on attempt {} of run {}, which is not placed on it: "
          "dropped",
          node, update.resumption_index(), update.run_id());
      return absl::OkStatus();
    }
    return runs_->RecordNote(update.run_id(), update.resumption_index(),
                             absl::StrCat(update.detail(), " on ", node));
  }
  TESSERA_ASSIGN_OR_RETURN(const AttemptReport report, attempts_->Record(node, update));
  if (report.effect != AttemptReport::Effect::kRecorded) return absl::OkStatus();
  const v1::Run& run = report.run;
  if (report.first_start) {
    v1::Attempt a;
    a.set_run_id(run.id());
    a.set_resumption_index(run.resumption_index());
    a.set_status(v1::RUN_STATUS_RUNNING);
    a.set_image_digest(update.image_digest());
    auto st = runs_->RecordAttempt(a).status();
    if (!st.ok() && !absl::IsFailedPrecondition(st)) return st;
  }
  return FinishIfDone(node, update, report);
}

absl::Status WorkerSessions::FinishIfDone(const std::string& node, const v1::AttemptUpdate& update,
                                          const AttemptReport& report) {
  const v1::Run& run = report.run;
  const AttemptState& state = report.state;
  if (update.phase() == v1::ATTEMPT_PHASE_START_FAILED && update.setup_failure()) {
    // The run's image could not be had: the run's to fix, not the node's.
    control_->StopAttempt(run, v1::ATTEMPT_END_REASON_SETUP_FAILED, update.detail());
    return control_->EndAttempt(run.id(), run.resumption_index(), state,
                                v1::ATTEMPT_END_REASON_SETUP_FAILED, v1::DETECTION_METHOD_EXIT_CODE,
                                update.detail());
  }
  if (update.phase() == v1::ATTEMPT_PHASE_START_FAILED && update.preflight_checks_size() > 0) {
    // The node is not fit to run anything: out of service with the evidence, and the run goes
    // elsewhere without using a retry (it did nothing wrong, and nothing ran).
    const std::string detail = absl::StrCat(node, " failed its pre-flight checks (",
                                            FailedPreflightChecks(update.preflight_checks()), ")");
    if (metrics_) metrics_->PreflightFailed(update.preflight_checks());
    if (auto st =
            CordonAfterPreflight(*nodes_, node, run, update.preflight_checks(), clock_->Now());
        !st.ok()) {
      spdlog::error("node {} failed its pre-flight checks but could not be cordoned: {}", node,
                    st.ToString());
    }
    control_->StopAttempt(run, v1::ATTEMPT_END_REASON_PREFLIGHT_FAILED, detail);
    return control_->EndAttempt(run.id(), run.resumption_index(), state,
                                v1::ATTEMPT_END_REASON_PREFLIGHT_FAILED,
                                v1::DETECTION_METHOD_PREFLIGHT, detail);
  }
  if (update.phase() == v1::ATTEMPT_PHASE_START_FAILED) {
    control_->StopAttempt(run, v1::ATTEMPT_END_REASON_NODE_FAILURE,
                          "the run could not start on a node");
    return control_->EndAttempt(
        run.id(), run.resumption_index(), state, v1::ATTEMPT_END_REASON_NODE_FAILURE,
        v1::DETECTION_METHOD_EXIT_CODE,
        absl::StrCat("ranks could not start on ", node, ": ", update.detail()));
  }
  if (update.phase() == v1::ATTEMPT_PHASE_LOST) {
    control_->StopAttempt(run, v1::ATTEMPT_END_REASON_NODE_FAILURE, "a node's worker restarted");
    return control_->EndAttempt(
        run.id(), run.resumption_index(), state, v1::ATTEMPT_END_REASON_NODE_FAILURE,
        v1::DETECTION_METHOD_EXIT_CODE,
        absl::StrCat("the worker on ", node, " restarted: ", update.detail()));
  }
  const v1::AttemptEndReason failure = state.control_plane_fault
                                           ? v1::ATTEMPT_END_REASON_CONTROL_PLANE
                                           : v1::ATTEMPT_END_REASON_USER_EXIT;
  if (report.newly_failed && !report.all_finished) {
    // One rank failed: the others cannot go on without it.
    control_->StopAttempt(run, failure, "another rank failed");
  }
  if (!report.all_finished) return absl::OkStatus();
  v1::AttemptEndReason reason = v1::ATTEMPT_END_REASON_SUCCEEDED;
  if (state.stop_reason != v1::ATTEMPT_END_REASON_UNSPECIFIED) {
    reason = state.stop_reason;
  } else if (state.first_failed_rank >= 0) {
    reason = failure;
  }
  if (!state.stop_node.empty()) {
    // A stop that blamed a node (a hang, a straggler, a node taken out of service), whose ranks
    // exited before its caller recorded the end: the same end, whoever records it first.
    AttemptState blamed = state;
    blamed.first_failed_node = state.stop_node;
    return control_->EndAttempt(run.id(), run.resumption_index(), blamed, reason,
                                state.stop_detection, state.stop_detail);
  }
  std::string detail = update.detail();
  if ((reason == v1::ATTEMPT_END_REASON_PREEMPTED || reason == v1::ATTEMPT_END_REASON_RESIZED) &&
      !state.stop_detail.empty()) {
    // Why: for a higher-priority run, to return borrowed GPUs, to grow back to all its nodes.
    detail = state.stop_detail;
  }
  if (reason == v1::ATTEMPT_END_REASON_CONTROL_PLANE && detail.empty()) {
    detail = absl::StrCat("rank ", state.first_failed_rank, " on ", state.first_failed_node,
                          " was fenced or its exit status was lost");
  }
  return control_->EndAttempt(run.id(), run.resumption_index(), state, reason,
                              v1::DETECTION_METHOD_EXIT_CODE, detail);
}

}  // namespace tessera::scheduler
