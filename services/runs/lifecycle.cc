#include "services/runs/lifecycle.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/timestamps.h"

namespace tessera::runs {
namespace {

// Position of a status along an attempt's life; terminal statuses share the last place.
int Rank(v1::RunStatus s) {
  switch (s) {
    case v1::RUN_STATUS_PENDING:
      return 0;
    case v1::RUN_STATUS_QUEUED:
      return 1;
    case v1::RUN_STATUS_STARTING:
      return 2;
    case v1::RUN_STATUS_RUNNING:
      return 3;
    case v1::RUN_STATUS_TERMINATING:
      return 4;
    case v1::RUN_STATUS_COMPLETED:
    case v1::RUN_STATUS_STOPPED:
    case v1::RUN_STATUS_FAILED:
      return 5;
    default:
      return -1;
  }
}

bool IsSystemFailure(v1::AttemptEndReason r) {
  return r == v1::ATTEMPT_END_REASON_NODE_FAILURE || r == v1::ATTEMPT_END_REASON_GPU_FAULT ||
         r == v1::ATTEMPT_END_REASON_HANG || r == v1::ATTEMPT_END_REASON_STRAGGLER;
}

std::string NodeList(const v1::Attempt& a) {
  std::vector<std::string> names;
  for (const auto& n : a.nodes()) names.push_back(n.node_name());
  return absl::StrJoin(names, ", ");
}

std::string FailureMessage(const v1::Attempt& a) {
  const std::string node = a.first_failed_node().empty() ? "" : a.first_failed_node();
  switch (a.end_reason()) {
    case v1::ATTEMPT_END_REASON_GPU_FAULT:
      return absl::StrCat("Run was stopped due to a GPU fault", node.empty() ? "" : " on ", node);
    case v1::ATTEMPT_END_REASON_HANG:
      return absl::StrCat("Run was stopped because it hung", a.reason().empty() ? "" : ": ",
                          a.reason());
    case v1::ATTEMPT_END_REASON_STRAGGLER:
      return absl::StrCat("Run was stopped because of a straggler node", node.empty() ? "" : " ",
                          node);
    default:
      return absl::StrCat("Run was stopped due to node failure", node.empty() ? "" : " (", node,
                          node.empty() ? "" : ")");
  }
}

int FirstExitCode(const v1::Attempt& a) {
  for (const auto& e : a.rank_exits()) {
    if (e.rank() == a.first_failed_rank() && (e.exit_code() != 0 || e.signal() != 0)) {
      return e.signal() != 0 ? 128 + e.signal() : e.exit_code();
    }
  }
  for (const auto& e : a.rank_exits()) {
    if (e.exit_code() != 0) return e.exit_code();
    if (e.signal() != 0) return 128 + e.signal();
  }
  return 1;
}

v1::Attempt NextAttempt(const v1::Run& run, int index, absl::Time now) {
  v1::Attempt next;
  next.set_run_id(run.id());
  next.set_resumption_index(index);
  next.set_status(v1::RUN_STATUS_QUEUED);
  *next.mutable_created_at() = ToProtoTime(now);
  next.set_first_failed_rank(-1);
  return next;
}

void Finish(v1::Run& run, v1::RunStatus status, const std::string& reason, absl::Time now) {
  run.set_status(status);
  run.set_status_reason(reason);
  *run.mutable_ended_at() = ToProtoTime(now);
}

}  // namespace

bool IsActive(v1::RunStatus s) {
  return s == v1::RUN_STATUS_STARTING || s == v1::RUN_STATUS_RUNNING ||
         s == v1::RUN_STATUS_TERMINATING;
}

int RetryLimit(const v1::RunSpec& spec) {
  // Turned off in so many words (`retry_on_system_failure: false`, `mcli watchdog --disable`):
  // no retries, whatever max_retries says (it still counts for retry_on_exit_codes).
  if (spec.scheduling().has_retry_on_system_failure() &&
      !spec.scheduling().retry_on_system_failure()) {
    return 0;
  }
  if (spec.scheduling().has_max_retries()) return spec.scheduling().max_retries();
  return spec.scheduling().retry_on_system_failure() ? 10 : 0;
}

// Retries for the exit codes the run names (scheduling.retry_on_exit_codes): the same
// max_retries, or 10 when it is not set.
int ExitCodeRetryLimit(const v1::RunSpec& spec, int code) {
  const auto& codes = spec.scheduling().retry_on_exit_codes();
  if (std::find(codes.begin(), codes.end(), code) == codes.end()) return 0;
  return spec.scheduling().has_max_retries() ? spec.scheduling().max_retries() : 10;
}

std::optional<v1::Attempt> CurrentAttempt(const v1::Run& run,
                                          const std::vector<v1::Attempt>& attempts) {
  for (const auto& a : attempts) {
    if (a.resumption_index() == run.resumption_index()) return a;
  }
  return std::nullopt;
}

v1::RunEvent MakeEvent(const v1::Run& run, v1::RunEventType type, std::string message,
                       absl::Time now) {
  v1::RunEvent e;
  e.set_run_id(run.id());
  e.set_resumption_index(run.resumption_index());
  e.set_type(type);
  e.set_message(std::move(message));
  *e.mutable_time() = ToProtoTime(now);
  return e;
}

namespace {

// The run goes back to the queue for its next attempt.
void Requeue(v1::Run& r, absl::Time now, std::vector<v1::RunEvent>& events) {
  r.set_status(v1::RUN_STATUS_QUEUED);
  r.set_resumption_index(r.resumption_index() + 1);
  events.push_back(
      MakeEvent(r, v1::RUN_EVENT_TYPE_REQUEUED, "Run placed back in the scheduling queue", now));
}

// A system failure the run has no retries left for.
void FailForGood(v1::Run& r, const std::string& why, absl::Time now,
                 std::vector<v1::RunEvent>& events) {
  Finish(r, v1::RUN_STATUS_FAILED, why, now);
  events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_FAILED, absl::StrCat("Run failed: ", why), now));
}

// The attempt placed: its nodes, and the PLACED (and RESIZED) events.
void Placed(const v1::Run& run, const v1::Attempt& current, const v1::Attempt& update,
            absl::Time now, v1::Attempt& a, Transition& t) {
  v1::Run& r = t.run;
  *a.mutable_nodes() = update.nodes();
  a.set_cluster(update.cluster());
  a.set_gpu_type(update.gpu_type());
  a.set_master_addr(update.master_addr());
  a.set_master_port(update.master_port());
  r.set_pending_seconds(r.pending_seconds() +
                        absl::ToDoubleSeconds(now - FromProtoTime(current.created_at())));
  if (run.status() == v1::RUN_STATUS_QUEUED) r.set_status(v1::RUN_STATUS_STARTING);
  *r.mutable_nodes() = update.nodes();
  r.set_master_port(update.master_port());  // the scheduler keeps it free on the head node
  *a.mutable_spare_nodes() = update.spare_nodes();
  std::string placed = absl::StrCat("Run placed on ", NodeList(a));
  if (update.spare_nodes_size() > 0) {
    absl::StrAppend(&placed, " (", absl::StrJoin(update.spare_nodes(), ", "),
                    update.spare_nodes_size() == 1 ? " a hot spare" : " hot spares",
                    " of its pool, the images of its running runs already pulled)");
  }
  t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_PLACED, placed, now));
  if (!update.placement_note().empty()) {
    // Fewer nodes than it asks for (compute.min_nodes): the scheduler says why.
    a.set_placement_note(update.placement_note());
    t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_RESIZED, update.placement_note(), now));
  }
}

// The attempt's ranks started: the image digest pinned, the STARTED event.
void Started(const v1::Run& run, const v1::Attempt& update, absl::Time now, v1::Attempt& a,
             Transition& t) {
  v1::Run& r = t.run;
  *a.mutable_started_at() = ToProtoTime(now);
  if (!update.image_digest().empty()) {
    a.set_image_digest(update.image_digest());
    if (r.image_digest().empty()) {
      // Pinned: resumptions run exactly this image, whatever its tag points to later.
      r.set_image_digest(update.image_digest());
      t.events.push_back(MakeEvent(
          r, v1::RUN_EVENT_TYPE_SETUP,
          absl::StrCat("Running image ", run.spec().image(), " (", update.image_digest(), ")"),
          now));
    }
  }
  a.set_resumed_from_step(update.resumed_from_step());
  if (!r.has_started_at()) *r.mutable_started_at() = ToProtoTime(now);
  if (run.status() == v1::RUN_STATUS_STARTING) r.set_status(v1::RUN_STATUS_RUNNING);
  t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_STARTED, "Run started", now));
}

// A user's command exited: retried when the run asked for it (retry_on_exit_codes), failed
// otherwise.
void AfterExit(const v1::Run& run, const v1::Attempt& update, absl::Time now, Transition& t) {
  v1::Run& r = t.run;
  const int code = FirstExitCode(update);
  const std::string where = update.first_failed_node().empty()
                                ? ""
                                : absl::StrCat(" (rank ", update.first_failed_rank(), " on ",
                                               update.first_failed_node(), ")");
  const int limit = ExitCodeRetryLimit(run.spec(), code);
  if (limit > 0 && run.retries_used() < limit) {
    // A transient error the run asked to be retried on: requeued, from its checkpoint.
    r.set_retries_used(run.retries_used() + 1);
    t.events.push_back(
        MakeEvent(r, v1::RUN_EVENT_TYPE_REQUEUED,
                  absl::StrCat("Attempt failed with exit code ", code, where,
                               ", which scheduling.retry_on_exit_codes retries (retry ",
                               r.retries_used(), " of ", limit, ")"),
                  now));
    Requeue(r, now, t.events);
  } else {
    Finish(r, v1::RUN_STATUS_FAILED, absl::StrCat("exit code ", code), now);
    t.events.push_back(
        MakeEvent(r, v1::RUN_EVENT_TYPE_FAILED,
                  absl::StrCat("Run failed with exit code ", code, where,
                               limit > 0 ? absl::StrCat(" after all ", limit, " retries") : ""),
                  now));
  }
}

// Interrupted by a fault of Tessera, or its node failed its pre-flight checks: requeued without
// using a retry, up to a cap.
void AfterNoFaultOfTheRun(const v1::Run& run, const v1::Attempt& update, absl::Time now,
                          Transition& t) {
  v1::Run& r = t.run;
  if (update.end_reason() == v1::ATTEMPT_END_REASON_CONTROL_PLANE) {
    // Not the run's fault nor its nodes': requeued without using a retry. The cap only
    // stops a control plane that fails the same way forever from looping the run.
    r.set_control_plane_interruptions(run.control_plane_interruptions() + 1);
    t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_CONTROL_PLANE_FAULT,
                                 absl::StrCat("Run was interrupted by a fault of Tessera",
                                              update.reason().empty() ? "" : ": ", update.reason(),
                                              " (not counted against max_retries)"),
                                 now));
    if (r.control_plane_interruptions() <= kMaxControlPlaneInterruptions) {
      Requeue(r, now, t.events);
    } else {
      FailForGood(
          r,
          absl::StrCat(kMaxControlPlaneInterruptions, " interruptions by faults of Tessera itself"),
          now, t.events);
    }
  } else {
    // Nothing ran and the node is out of service: requeued without using a retry. The cap
    // only stops a run that no node can start from looping forever.
    r.set_preflight_failures(run.preflight_failures() + 1);
    t.events.push_back(
        MakeEvent(r, v1::RUN_EVENT_TYPE_NODE_FAILURE,
                  absl::StrCat("Attempt did not start: ", update.reason(),
                               "; the node is cordoned and the run placed elsewhere (not counted "
                               "against max_retries)"),
                  now));
    if (r.preflight_failures() <= kMaxPreflightFailures) {
      Requeue(r, now, t.events);
    } else {
      FailForGood(r,
                  absl::StrCat(kMaxPreflightFailures,
                               " attempts whose nodes failed their pre-flight checks"),
                  now, t.events);
    }
  }
}

// The attempt ended: what it ended with recorded, and the run finished or requeued.
void Ended(const v1::Run& run, const v1::Attempt& update, absl::Time now, v1::Attempt& a,
           Transition& t) {
  v1::Run& r = t.run;
  *a.mutable_ended_at() = ToProtoTime(now);
  a.set_end_reason(update.end_reason());
  a.set_detection_method(update.detection_method());
  a.set_reason(update.reason());
  *a.mutable_rank_exits() = update.rank_exits();
  a.set_first_failed_rank(update.first_failed_rank());
  a.set_first_failed_node(update.first_failed_node());
  a.set_last_step(std::max(a.last_step(), update.last_step()));
  if (a.has_started_at()) {
    r.set_running_seconds(r.running_seconds() +
                          absl::ToDoubleSeconds(now - FromProtoTime(a.started_at())));
  }
  const auto reason = update.end_reason();
  if (reason == v1::ATTEMPT_END_REASON_SUCCEEDED) {
    Finish(r, v1::RUN_STATUS_COMPLETED, "", now);
    t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_COMPLETED, "Run completed", now));
  } else if (run.stop_requested() || reason == v1::ATTEMPT_END_REASON_STOPPED ||
             reason == v1::ATTEMPT_END_REASON_MAX_DURATION) {
    std::string why = r.status_reason().empty() ? update.reason() : r.status_reason();
    if (reason == v1::ATTEMPT_END_REASON_MAX_DURATION && why.empty()) {
      why = "it exceeded its max_duration";
    }
    Finish(r, v1::RUN_STATUS_STOPPED, why, now);
    t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_STOPPED,
                                 why.empty() ? "Run stopped" : absl::StrCat("Run stopped: ", why),
                                 now));
  } else if (reason == v1::ATTEMPT_END_REASON_SETUP_FAILED) {
    // The run's own doing (an image that does not exist, or that it may not pull): trying
    // again elsewhere would fail the same way.
    Finish(r, v1::RUN_STATUS_FAILED, update.reason(), now);
    t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_FAILED,
                                 absl::StrCat("Run failed: ", update.reason()), now));
  } else if (reason == v1::ATTEMPT_END_REASON_USER_EXIT ||
             reason == v1::ATTEMPT_END_REASON_UNSPECIFIED) {
    AfterExit(run, update, now, t);
  } else if (reason == v1::ATTEMPT_END_REASON_PREEMPTED) {
    // "Run was preempted for a higher-priority run", "... to return borrowed GPUs (...)".
    t.events.push_back(MakeEvent(
        r, v1::RUN_EVENT_TYPE_PREEMPTED,
        absl::StrCat("Run was preempted", update.reason().empty() ? "" : " ", update.reason()),
        now));
    Requeue(r, now, t.events);
  } else if (reason == v1::ATTEMPT_END_REASON_RESIZED) {
    // Stopped by the scheduler right after a checkpoint to resume on all of its nodes:
    // nothing failed, so no retry is used.
    t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_RESIZED,
                                 absl::StrCat("Run was stopped to resize",
                                              update.reason().empty() ? "" : ": ", update.reason()),
                                 now));
    Requeue(r, now, t.events);
  } else if (reason == v1::ATTEMPT_END_REASON_CONTROL_PLANE ||
             reason == v1::ATTEMPT_END_REASON_PREFLIGHT_FAILED) {
    AfterNoFaultOfTheRun(run, update, now, t);
  } else if (IsSystemFailure(reason)) {
    t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_NODE_FAILURE, FailureMessage(update), now));
    const int limit = RetryLimit(run.spec());
    if (run.retries_used() < limit) {
      r.set_retries_used(run.retries_used() + 1);
      Requeue(r, now, t.events);
    } else {
      FailForGood(r,
                  limit == 0 ? "a system failure and retry_on_system_failure is off"
                             : absl::StrCat("a system failure after all ", limit, " retries"),
                  now, t.events);
    }
  }
}

}  // namespace

absl::StatusOr<Transition> ApplyAttemptUpdate(const v1::Run& run,
                                              const std::optional<v1::Attempt>& current,
                                              const v1::Attempt& update, absl::Time now) {
  if (Rank(update.status()) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attempt.status: ", v1::RunStatus_Name(update.status()), " is not an attempt state"));
  }
  Transition t{run, {}, {}, true};
  v1::Run& r = t.run;
  *r.mutable_updated_at() = ToProtoTime(now);

  // Admission of a new attempt: PENDING run, next resumption index.
  if (update.status() == v1::RUN_STATUS_QUEUED) {
    if (current && current->resumption_index() == update.resumption_index()) {
      t.changed = false;  // already admitted
      return t;
    }
    if (run.status() != v1::RUN_STATUS_PENDING ||
        update.resumption_index() != run.resumption_index() + 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "run ", run.name(), " is ", v1::RunStatus_Name(run.status()), " at resumption ",
          run.resumption_index(), "; cannot queue attempt ", update.resumption_index()));
    }
    r.set_status(v1::RUN_STATUS_QUEUED);
    r.set_resumption_index(update.resumption_index());
    t.attempts.push_back(NextAttempt(r, update.resumption_index(), now));
    t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_QUEUED, "Run queued", now));
    return t;
  }

  if (!current || current->resumption_index() != update.resumption_index() ||
      update.resumption_index() != run.resumption_index()) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run.name(), " is at resumption ", run.resumption_index(),
                     "; the report for resumption ", update.resumption_index(), " is stale"));
  }
  if (Rank(update.status()) < Rank(current->status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("attempt ", update.resumption_index(), " of run ", run.name(), " is already ",
                     v1::RunStatus_Name(current->status()), "; cannot go back to ",
                     v1::RunStatus_Name(update.status())));
  }
  if (update.status() == current->status() || IsTerminal(current->status())) {
    t.changed = false;  // a repeated report
    return t;
  }

  v1::Attempt a = *current;
  a.set_status(update.status());
  switch (update.status()) {
    case v1::RUN_STATUS_STARTING:
      Placed(run, *current, update, now, a, t);
      break;
    case v1::RUN_STATUS_RUNNING:
      Started(run, update, now, a, t);
      break;
    case v1::RUN_STATUS_TERMINATING:
      break;  // the run is already TERMINATING (stop) or the scheduler is ending the attempt
    default:
      Ended(run, update, now, a, t);
      break;
  }
  t.attempts.insert(t.attempts.begin(), a);
  if (r.status() == v1::RUN_STATUS_QUEUED && r.resumption_index() > run.resumption_index()) {
    // Requeued: the next attempt gets new nodes and a port. Why, and where it ran, tell the
    // scheduler whether it resumes on the pool's spares (after a node fault) and which nodes
    // still hold its image.
    r.set_requeued_after(a.end_reason());
    r.clear_requeued_from_nodes();
    for (const auto& n : r.nodes()) {
      if (n.node_name() != a.first_failed_node()) r.add_requeued_from_nodes(n.node_name());
    }
    const bool node_suspected = a.end_reason() == v1::ATTEMPT_END_REASON_HANG ||
                                a.end_reason() == v1::ATTEMPT_END_REASON_STRAGGLER;
    if (node_suspected && !a.first_failed_node().empty()) {
      r.set_avoid_node(a.first_failed_node());
      *r.mutable_avoid_node_until() = ToProtoTime(now + kAvoidSuspectNodeFor);
    } else if (r.has_avoid_node_until() && FromProtoTime(r.avoid_node_until()) <= now) {
      r.clear_avoid_node();
      r.clear_avoid_node_until();
    }
    // Otherwise a suspected node stays avoided for its while whatever ended the attempts since:
    // its sweep (and the follow-up) may still be measuring it, and a run placed there competes
    // with the canaries, so that a check that times out condemns a healthy node and evicts the
    // run (bench_goodput: a netdrop's resumption landed on the hung node mid-sweep).
    r.clear_nodes();
    r.clear_master_port();
    t.attempts.push_back(NextAttempt(r, r.resumption_index(), now));
  }
  return t;
}

Transition RequestStop(const v1::Run& run, const std::optional<v1::Attempt>& current,
                       const std::string& actor, const std::string& reason, absl::Time now) {
  Transition t{run, {}, {}, true};
  v1::Run& r = t.run;
  if (IsTerminal(run.status()) || run.status() == v1::RUN_STATUS_TERMINATING) {
    t.changed = false;
    return t;
  }
  *r.mutable_updated_at() = ToProtoTime(now);
  r.set_stop_requested(true);
  const std::string why =
      reason.empty() ? absl::StrCat("stopped by ", actor) : absl::StrCat(reason, " (", actor, ")");
  r.set_status_reason(why);
  if (IsActive(run.status())) {
    r.set_status(v1::RUN_STATUS_TERMINATING);
    t.events.push_back(MakeEvent(r, v1::RUN_EVENT_TYPE_STOP_REQUESTED,
                                 absl::StrCat("Stop requested: ", why), now));
    return t;
  }
  Finish(r, v1::RUN_STATUS_STOPPED, why, now);
  if (current && !IsTerminal(current->status())) {
    v1::Attempt a = *current;
    a.set_status(v1::RUN_STATUS_STOPPED);
    a.set_end_reason(v1::ATTEMPT_END_REASON_STOPPED);
    a.set_detection_method(v1::DETECTION_METHOD_OPERATOR);
    a.set_reason(why);
    *a.mutable_ended_at() = ToProtoTime(now);
    t.attempts.push_back(a);
  }
  t.events.push_back(
      MakeEvent(r, v1::RUN_EVENT_TYPE_STOPPED, absl::StrCat("Run stopped: ", why), now));
  return t;
}

}  // namespace tessera::runs
