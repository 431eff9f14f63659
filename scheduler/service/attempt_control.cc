#include "scheduler/service/attempt_control.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tessera::scheduler {

AttemptControl::AttemptControl(std::shared_ptr<AttemptTracker> attempts,
                               std::shared_ptr<RunsClient> runs,
                               std::shared_ptr<WorkerRegistry> workers, SchedulerConfig config,
                               std::shared_ptr<ProgressRelay> progress)
    : attempts_(std::move(attempts)),
      runs_(std::move(runs)),
      workers_(std::move(workers)),
      config_(config),
      progress_(std::move(progress)) {}

std::string AttemptControl::NextCommandId() {
  absl::MutexLock lock(&mu_);
  return absl::StrCat("cmd-", next_command_++);
}

bool AttemptControl::Send(const std::string& node, const v1::ControlMessage& message) {
  return workers_->Send(node, message);
}

void AttemptControl::SendStop(const std::string& node, const std::string& run_id, int resumption,
                              const std::string& reason) {
  v1::ControlMessage msg;
  msg.set_command_id(NextCommandId());
  auto* stop = msg.mutable_stop_attempt();
  stop->set_run_id(run_id);
  stop->set_resumption_index(resumption);
  stop->mutable_grace_period()->set_seconds(absl::ToInt64Seconds(config_.stop_grace));
  stop->set_reason(reason);
  workers_->Send(node, msg);
}

void AttemptControl::StopAttempt(const v1::Run& run, v1::AttemptEndReason why,
                                 const std::string& reason, const std::string& node,
                                 v1::DetectionMethod how) {
  if (!attempts_->MarkStopping(run.id(), run.resumption_index(), why, reason, node, how)) return;
  spdlog::info("stopping run {} (attempt {}) on {} node(s): {}", run.name(), run.resumption_index(),
               run.nodes_size(), reason);
  for (const auto& n : run.nodes())
    SendStop(n.node_name(), run.id(), run.resumption_index(), reason);
}

absl::Status AttemptControl::EndAttempt(const std::string& run_id, int resumption,
                                        const AttemptState& state, v1::AttemptEndReason reason,
                                        v1::DetectionMethod how, const std::string& detail,
                                        v1::Run* result) {
  v1::Attempt a;
  a.set_run_id(run_id);
  a.set_resumption_index(resumption);
  a.set_status(reason == v1::ATTEMPT_END_REASON_SUCCEEDED ? v1::RUN_STATUS_COMPLETED
               : reason == v1::ATTEMPT_END_REASON_STOPPED ? v1::RUN_STATUS_STOPPED
                                                          : v1::RUN_STATUS_FAILED);
  a.set_end_reason(reason);
  a.set_detection_method(how);
  a.set_reason(detail);
  for (const auto& e : state.exits) *a.add_rank_exits() = e;
  a.set_first_failed_rank(state.first_failed_rank);
  a.set_first_failed_node(state.first_failed_node);
  // Reports the run manager could not take (it or its database was away) go first: a run must
  // not end at an older step than its ranks last reported. Should they fail again, the end is
  // still recorded (or fails alike) and they follow with the next retry.
  if (progress_ != nullptr) {
    if (absl::Status st = progress_->DeliverKept(run_id, resumption); !st.ok()) {
      spdlog::warn("run {} attempt {} ends before its kept progress could go: {}", run_id,
                   resumption, st.ToString());
    }
  }
  auto recorded = runs_->RecordAttempt(a);
  attempts_->Ended(run_id, resumption, state.finished, reason == v1::ATTEMPT_END_REASON_SUCCEEDED);
  if (recorded.ok() && result != nullptr) *result = *recorded;
  const absl::Status st = recorded.status();
  if (absl::IsFailedPrecondition(st)) return absl::OkStatus();  // already recorded
  return st;
}

absl::StatusOr<std::vector<std::string>> AttemptControl::EndAttemptsOnNode(
    const std::string& node, v1::AttemptEndReason reason, v1::DetectionMethod how,
    const std::string& detail, const std::string& only_run_id) {
  TESSERA_ASSIGN_OR_RETURN(auto active,
                           runs_->ListRuns({v1::RUN_STATUS_STARTING, v1::RUN_STATUS_RUNNING,
                                            v1::RUN_STATUS_TERMINATING}));
  std::vector<std::string> names;
  for (const auto& run : active) {
    if (!only_run_id.empty() && run.id() != only_run_id) continue;
    bool on_node = false;
    for (const auto& n : run.nodes()) on_node = on_node || n.node_name() == node;
    if (!on_node) continue;
    AttemptState state = attempts_->State(run.id(), run.resumption_index());
    state.first_failed_node = node;
    const v1::AttemptEndReason why = run.stop_requested() ? v1::ATTEMPT_END_REASON_STOPPED : reason;
    // A stop the user asked for blames no node.
    StopAttempt(run, why, detail, why == v1::ATTEMPT_END_REASON_STOPPED ? "" : node, how);
    auto st = EndAttempt(run.id(), run.resumption_index(), state, why, how, detail);
    if (!st.ok() && !absl::IsFailedPrecondition(st)) return st;
    spdlog::warn("run {} attempt {} ended: {}", run.name(), run.resumption_index(), detail);
    names.push_back(run.name());
  }
  return names;
}

}  // namespace tessera::scheduler
