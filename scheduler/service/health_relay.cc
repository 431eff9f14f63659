// The scheduler's part in the health loop: relaying what workers report about the hardware to
// the health API, carrying the health API's commands to workers, and evicting the runs of a node
// the health API took out of service.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "healthcheck/gpu_faults.h"
#include "scheduler/service/scheduler_core.h"
#include "services/common/rpc.h"
#include "services/common/status_macros.h"

namespace tessera::scheduler {

absl::Status SchedulerCore::OnHealthResult(const std::string& node,
                                           const v1::HealthCheckResult& result) {
  if (!health_) return absl::OkStatus();
  v1::HealthCheckResult r = result;
  r.set_node_name(node);  // the stream's node, whatever the message says
  return health_->ReportHealthResult(r);
}

absl::Status SchedulerCore::OnGpuFault(const std::string& node, const v1::GpuFault& fault) {
  v1::GpuFault f = fault;
  f.set_node_name(node);
  absl::Status st =
      health_ ? health_->ReportGpuFault(f) : absl::UnavailableError("no health API is configured");
  if (st.ok() || !health::IsFatalGpuFault(f)) return st;
  // The health API would cordon the node and evict its runs; without it, at least the runs move.
  spdlog::error("GPU fault on {} not taken by the health API ({}): evicting its runs", node,
                st.ToString());
  return EndAttemptsOnNode(node, v1::ATTEMPT_END_REASON_GPU_FAULT, v1::DETECTION_METHOD_GPU_PROBE,
                           absl::StrCat("GPU ", f.gpu_index(), " of ", node, ": ", f.detail()))
      .status();
}

absl::Status SchedulerCore::OnRankHang(const std::string& node, const v1::RankHang& hang) {
  v1::ReportRankHangRequest req;
  req.set_idempotency_key(
      absl::StrCat("hang/", hang.run_id(), "/", hang.resumption_index(), "/", hang.rank()));
  req.set_run_id(hang.run_id());
  req.set_resumption_index(hang.resumption_index());
  req.set_rank(hang.rank());
  req.set_node_name(node);
  req.set_last_step(hang.last_step());
  req.set_seconds_without_progress(hang.seconds_without_progress());
  req.set_in_collective(hang.in_collective());
  absl::Status st = health_ ? health_->ReportRankHang(req)
                            : absl::UnavailableError("no health API is configured");
  if (st.ok()) return st;
  spdlog::error("rank hang on {} not taken by the health API ({}): ending its attempt", node,
                st.ToString());
  v1::Run run;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(hang.run_id());
    if (it == active_.end() || it->second.resumption_index() != hang.resumption_index()) {
      return absl::OkStatus();  // already ended
    }
    run = it->second;
  }
  AttemptState state;
  {
    absl::MutexLock lock(&mu_);
    state = attempts_[{run.id(), run.resumption_index()}];
  }
  state.first_failed_rank = hang.rank();
  state.first_failed_node = node;
  const std::string detail =
      absl::StrFormat("rank %d on %s made no progress for %.1f s (last step %d)", hang.rank(), node,
                      hang.seconds_without_progress(), hang.last_step());
  StopAttemptOn(run, v1::ATTEMPT_END_REASON_HANG, detail);
  return EndAttempt(run.id(), run.resumption_index(), state, v1::ATTEMPT_END_REASON_HANG,
                    v1::DETECTION_METHOD_HANG_TIMEOUT, detail);
}

absl::Status SchedulerCore::DispatchToWorker(const Who& who, const v1::DispatchToWorkerRequest& req,
                                             v1::DispatchToWorkerResponse*) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "sending commands to workers"));
  if (req.node_name().empty()) return absl::InvalidArgumentError("node_name: required");
  v1::ControlMessage msg;
  msg.set_command_id(NextCommandId());
  switch (req.command_case()) {
    case v1::DispatchToWorkerRequest::kStartCanary:
      *msg.mutable_start_canary() = req.start_canary();
      break;
    case v1::DispatchToWorkerRequest::kInjectFault:
      *msg.mutable_inject_fault() = req.inject_fault();
      break;
    default:
      return absl::InvalidArgumentError("command: start_canary or inject_fault is required");
  }
  const absl::Duration timeout =
      req.timeout_seconds() > 0 ? absl::Seconds(req.timeout_seconds()) : absl::Seconds(10);
  return workers_->SendAndWait(req.node_name(), msg, timeout);
}

absl::Status SchedulerCore::EvictNode(const Who& who, const v1::EvictNodeRequest& req,
                                      v1::EvictNodeResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "evicting a node's runs"));
  if (req.node_name().empty()) return absl::InvalidArgumentError("node_name: required");
  if (req.reason() == v1::ATTEMPT_END_REASON_UNSPECIFIED) {
    return absl::InvalidArgumentError("reason: required");
  }
  TESSERA_ASSIGN_OR_RETURN(auto names,
                           EndAttemptsOnNode(req.node_name(), req.reason(), req.detection_method(),
                                             req.detail(), req.run_id()));
  for (auto& n : names) resp->add_run_names(std::move(n));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> SchedulerCore::EndAttemptsOnNode(
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
    AttemptState state;
    {
      absl::MutexLock lock(&mu_);
      state = attempts_[{run.id(), run.resumption_index()}];
    }
    state.first_failed_node = node;
    StopAttemptOn(run, reason, detail);
    const v1::AttemptEndReason why = run.stop_requested() ? v1::ATTEMPT_END_REASON_STOPPED : reason;
    auto st = EndAttempt(run.id(), run.resumption_index(), state, why, how, detail);
    if (!st.ok() && !absl::IsFailedPrecondition(st)) return st;
    spdlog::warn("run {} attempt {} ended: {}", run.name(), run.resumption_index(), detail);
    names.push_back(run.name());
  }
  return names;
}

}  // namespace tessera::scheduler
