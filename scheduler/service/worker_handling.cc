// The worker side of the control stream: registration, leases, and what ranks do.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "scheduler/service/scheduler_core.h"
#include "services/common/status_util.h"

namespace tessera::scheduler {
namespace {

constexpr int kMaxCasRetries = 20;

v1::NodeEvent NodeEvent(const std::string& node, v1::NodeEventType type, const std::string& reason,
                        absl::Time now) {
  v1::NodeEvent e;
  e.set_node_name(node);
  e.set_type(type);
  *e.mutable_time() = ToProtoTime(now);
  e.mutable_actor()->set_kind(v1::ACTOR_KIND_SYSTEM);
  e.mutable_actor()->set_name("scheduler");
  e.set_reason(reason);
  return e;
}

bool IsFailure(const v1::RankExit& e) { return e.exit_code() != 0 || e.signal() != 0; }

}  // namespace

absl::StatusOr<v1::Registered> SchedulerCore::RegisterWorker(const v1::RegisterWorker& reg) {
  const v1::Node& offered = reg.node();
  if (offered.name().empty()) return absl::InvalidArgumentError("register.node.name: required");
  if (offered.gpu_count() < 0 || offered.gpu_count() > 64) {
    return absl::InvalidArgumentError("register.node.gpu_count: must be between 0 and 64");
  }
  const absl::Time now = clock_->Now();
  v1::Registered out;
  out.mutable_lease_duration()->set_seconds(absl::ToInt64Seconds(config_.lease));
  out.mutable_lease_duration()->set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(config_.lease % absl::Seconds(1))));
  out.mutable_heartbeat_interval()->set_seconds(absl::ToInt64Seconds(config_.heartbeat_interval));
  out.mutable_heartbeat_interval()->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(config_.heartbeat_interval % absl::Seconds(1))));

  for (int i = 0; i < kMaxCasRetries; ++i) {
    auto existing = nodes_->GetNode(offered.name());
    if (!existing.ok() && !absl::IsNotFound(existing.status())) return existing.status();
    v1::Node node = offered;
    node.set_liveness(v1::NODE_LIVENESS_ONLINE);
    *node.mutable_last_heartbeat_at() = ToProtoTime(now);
    *node.mutable_lease_expires_at() = ToProtoTime(now + config_.lease);
    v1::NodeEventType type = v1::NODE_EVENT_TYPE_REGISTERED;
    if (existing.ok()) {
      // What operators and the health API decided stays; the hardware description is the
      // worker's.
      node.set_admin_state(existing->admin_state());
      node.set_health(existing->health());
      node.set_status_reason(existing->status_reason());
      *node.mutable_registered_at() = existing->registered_at();
      for (const auto& [k, v] : existing->labels()) {
        if (!node.labels().count(k)) (*node.mutable_labels())[k] = v;
      }
      node.set_incarnation(existing->incarnation() + 1);
      if (existing->liveness() == v1::NODE_LIVENESS_LOST) type = v1::NODE_EVENT_TYPE_RECOVERED;
      auto updated = nodes_->UpdateNode(
          node, existing->version(),
          {NodeEvent(node.name(), type,
                     absl::StrCat("worker ", reg.process_id(), " registered (incarnation ",
                                  node.incarnation(), ")"),
                     now)});
      if (absl::IsAborted(updated.status())) continue;
      if (!updated.ok()) return updated.status();
    } else {
      node.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
      node.set_health(v1::NODE_HEALTH_HEALTHY);
      *node.mutable_registered_at() = ToProtoTime(now);
      node.set_incarnation(1);
      auto created = nodes_->CreateNode(node);
      if (absl::IsAlreadyExists(created.status())) continue;
      if (!created.ok()) return created.status();
      (void)nodes_->UpdateNode(
          *created, created->version(),
          {NodeEvent(node.name(), type,
                     absl::StrCat("worker ", reg.process_id(), " registered a new node"), now)});
    }
    out.set_incarnation(node.incarnation());
    spdlog::info("node {} registered ({} GPUs, incarnation {})", node.name(), node.gpu_count(),
                 node.incarnation());
    break;
  }

  // Attempts the worker still runs but the control plane does not place there are orphans
  // (the run ended or moved while the worker was away): stop them.
  if (reg.attempts_size() > 0) {
    auto active = runs_->ListRuns(
        {v1::RUN_STATUS_STARTING, v1::RUN_STATUS_RUNNING, v1::RUN_STATUS_TERMINATING});
    if (!active.ok()) return active.status();
    for (const auto& local : reg.attempts()) {
      bool known = false;
      for (const auto& run : *active) {
        if (run.id() != local.run_id() || run.resumption_index() != local.resumption_index())
          continue;
        for (const auto& n : run.nodes()) known = known || n.node_name() == offered.name();
      }
      if (known) continue;
      v1::ControlMessage msg;
      msg.set_command_id(NextCommandId());
      auto* stop = msg.mutable_stop_attempt();
      stop->set_run_id(local.run_id());
      stop->set_resumption_index(local.resumption_index());
      stop->mutable_grace_period()->set_seconds(absl::ToInt64Seconds(config_.stop_grace));
      stop->set_reason("orphaned attempt: it no longer runs on this node");
      workers_->Send(offered.name(), msg);
    }
  }
  return out;
}

absl::StatusOr<v1::LeaseRenewed> SchedulerCore::Heartbeat(const std::string& node_name,
                                                          const v1::Heartbeat& hb) {
  for (int i = 0; i < kMaxCasRetries; ++i) {
    auto node = nodes_->GetNode(node_name);
    if (!node.ok()) return node.status();
    if (node->liveness() == v1::NODE_LIVENESS_LOST) {
      // Too late: the node was declared lost and its attempts ended. The worker must have
      // fenced itself; it registers again to come back.
      return absl::FailedPreconditionError(
          absl::StrCat("node ", node_name, " was declared lost; register again"));
    }
    const absl::Time now = clock_->Now();
    v1::Node next = *node;
    *next.mutable_last_heartbeat_at() = ToProtoTime(now);
    *next.mutable_lease_expires_at() = ToProtoTime(now + config_.lease);
    auto updated = nodes_->UpdateNode(next, node->version(), {});
    if (absl::IsAborted(updated.status())) continue;
    if (!updated.ok()) return updated.status();
    v1::LeaseRenewed out;
    *out.mutable_expires_at() = next.lease_expires_at();
    out.set_heartbeat_sequence(hb.sequence());
    ReconcileFromHeartbeat(node_name, hb);
    return out;
  }
  return absl::AbortedError(absl::StrCat("node ", node_name, " is changing too often"));
}

void SchedulerCore::ReconcileFromHeartbeat(const std::string& node, const v1::Heartbeat& hb) {
  std::vector<v1::LocalAttempt> drained;
  // Each heartbeat says what the worker's ranks are doing. A report this instance missed (it
  // restarted, or took over from another) is recovered from it, so an attempt never waits
  // forever for a STARTED or FINISHED that went to a dead scheduler.
  for (const auto& local : hb.attempts()) {
    v1::AttemptUpdate update;
    update.set_run_id(local.run_id());
    update.set_resumption_index(local.resumption_index());
    {
      absl::MutexLock lock(&mu_);
      auto run = active_.find(local.run_id());
      if (run == active_.end() || run->second.resumption_index() != local.resumption_index()) {
        // An ended attempt: once its ranks are gone here, the node no longer drains it.
        if (local.running_ranks_size() == 0) drained.push_back(local);
        continue;  // not active here (yet): the next cycle learns it, the next heartbeat retries
      }
      const AttemptState& state = attempts_[{local.run_id(), local.resumption_index()}];
      if (local.lost()) {
        if (state.finished.count(node)) continue;
        update.set_phase(v1::ATTEMPT_PHASE_LOST);
        *update.mutable_rank_exits() = local.exited_ranks();
        update.set_detail("the worker restarted and killed the ranks it found");
      } else if (local.running_ranks_size() > 0) {
        if (state.started.count(node)) continue;
        update.set_phase(v1::ATTEMPT_PHASE_STARTED);
      } else if (local.exited_ranks_size() > 0) {
        if (state.finished.count(node)) continue;
        update.set_phase(v1::ATTEMPT_PHASE_FINISHED);
        *update.mutable_rank_exits() = local.exited_ranks();
        update.set_detail("recovered from a heartbeat");
      } else {
        continue;
      }
    }
    if (auto st = OnAttemptUpdate(node, update); !st.ok()) {
      spdlog::warn("reconciling node {} from its heartbeat: {}", node, st.ToString());
    }
  }
  for (const auto& local : drained) NodeDrained(local.run_id(), local.resumption_index(), node);
}

absl::Status SchedulerCore::OnAttemptUpdate(const std::string& node,
                                            const v1::AttemptUpdate& update) {
  v1::Run run;
  AttemptState state;
  bool first_start = false, all_finished = false, newly_failed = false, drained_now = false;
  bool known;
  {
    absl::MutexLock lock(&mu_);
    known = active_.count(update.run_id()) > 0;
  }
  if (!known) {
    // Placed before this instance started (a restart or a takeover): learn the active runs now
    // rather than drop the report.
    auto active = runs_->ListRuns(
        {v1::RUN_STATUS_STARTING, v1::RUN_STATUS_RUNNING, v1::RUN_STATUS_TERMINATING});
    if (!active.ok()) return active.status();
    absl::MutexLock lock(&mu_);
    for (const auto& r : *active) active_.emplace(r.id(), r);
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(update.run_id());
    if (it == active_.end() || it->second.resumption_index() != update.resumption_index()) {
      // An attempt that already ended: nothing left to decide, except that its ranks are gone.
      if (update.phase() != v1::ATTEMPT_PHASE_STARTED &&
          update.phase() != v1::ATTEMPT_PHASE_RANK_EXITED) {
        drained_now = true;
      } else {
        return absl::OkStatus();
      }
    }
  }
  if (drained_now) {
    NodeDrained(update.run_id(), update.resumption_index(), node);
    return absl::OkStatus();
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(update.run_id());
    // It may have ended between the two looks.
    if (it == active_.end() || it->second.resumption_index() != update.resumption_index()) {
      return absl::OkStatus();
    }
    run = it->second;
    AttemptState& s = attempts_[{update.run_id(), update.resumption_index()}];
    switch (update.phase()) {
      case v1::ATTEMPT_PHASE_STARTED:
        first_start = s.started.empty();
        s.started.insert(node);
        break;
      case v1::ATTEMPT_PHASE_RANK_EXITED:
      case v1::ATTEMPT_PHASE_FINISHED:
      case v1::ATTEMPT_PHASE_START_FAILED:
      case v1::ATTEMPT_PHASE_LOST:
        if (update.phase() == v1::ATTEMPT_PHASE_LOST) {
          // Not the user's failure: the ranks died with their worker. Recorded as exits, never
          // as the first failed rank.
          for (const auto& e : update.rank_exits()) s.exits.push_back(e);
          s.finished.insert(node);
          all_finished = true;
          for (const auto& n : run.nodes())
            all_finished = all_finished && s.finished.count(n.node_name());
          break;
        }
        for (const auto& e : update.rank_exits()) {
          s.exits.push_back(e);
          if (IsFailure(e) && s.first_failed_rank < 0 &&
              s.stop_reason == v1::ATTEMPT_END_REASON_UNSPECIFIED) {
            s.first_failed_rank = e.rank();
            s.first_failed_node = node;
            newly_failed = true;
          }
        }
        if (update.phase() == v1::ATTEMPT_PHASE_START_FAILED && s.first_failed_node.empty()) {
          s.first_failed_node = node;
          newly_failed = true;
        }
        if (update.phase() != v1::ATTEMPT_PHASE_RANK_EXITED) s.finished.insert(node);
        all_finished = true;
        for (const auto& n : run.nodes())
          all_finished = all_finished && s.finished.count(n.node_name());
        break;
      default:
        return absl::InvalidArgumentError("attempt_update.phase: required");
    }
    state = s;
  }
  if (first_start) {
    v1::Attempt a;
    a.set_run_id(run.id());
    a.set_resumption_index(run.resumption_index());
    a.set_status(v1::RUN_STATUS_RUNNING);
    auto st = runs_->RecordAttempt(a).status();
    if (!st.ok() && !absl::IsFailedPrecondition(st)) return st;
  }
  if (update.phase() == v1::ATTEMPT_PHASE_START_FAILED) {
    StopAttemptOn(run, v1::ATTEMPT_END_REASON_NODE_FAILURE, "the run could not start on a node");
    return EndAttempt(run.id(), run.resumption_index(), state, v1::ATTEMPT_END_REASON_NODE_FAILURE,
                      v1::DETECTION_METHOD_EXIT_CODE,
                      absl::StrCat("ranks could not start on ", node, ": ", update.detail()));
  }
  if (update.phase() == v1::ATTEMPT_PHASE_LOST) {
    StopAttemptOn(run, v1::ATTEMPT_END_REASON_NODE_FAILURE, "a node's worker restarted");
    return EndAttempt(run.id(), run.resumption_index(), state, v1::ATTEMPT_END_REASON_NODE_FAILURE,
                      v1::DETECTION_METHOD_EXIT_CODE,
                      absl::StrCat("the worker on ", node, " restarted: ", update.detail()));
  }
  if (newly_failed && !all_finished) {
    // One rank failed: the others cannot go on without it.
    StopAttemptOn(run, v1::ATTEMPT_END_REASON_USER_EXIT, "another rank failed");
  }
  if (!all_finished) return absl::OkStatus();
  v1::AttemptEndReason reason = v1::ATTEMPT_END_REASON_SUCCEEDED;
  if (state.stop_reason != v1::ATTEMPT_END_REASON_UNSPECIFIED) {
    reason = state.stop_reason;
  } else if (state.first_failed_rank >= 0) {
    reason = v1::ATTEMPT_END_REASON_USER_EXIT;
  }
  return EndAttempt(run.id(), run.resumption_index(), state, reason, v1::DETECTION_METHOD_EXIT_CODE,
                    update.detail());
}

absl::Status SchedulerCore::OnProgress(const std::string& node,
                                       const v1::ProgressUpdate& progress) {
  v1::ReportProgressRequest req;
  req.set_run_id(progress.run_id());
  req.set_resumption_index(progress.resumption_index());
  *req.mutable_progress() = progress.progress();
  req.set_node_name(node);
  return runs_->ReportProgress(req);
}

}  // namespace tessera::scheduler
