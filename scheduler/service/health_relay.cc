// The scheduler's part in the health loop: relaying what workers report about the hardware to
// the health API, carrying the health API's commands to workers, and evicting the runs of a node
// the health API took out of service.
#include "scheduler/service/health_relay.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "proto/policy/gpu_faults.h"
#include "proto/policy/rank_hang.h"
#include "services/common/rpc.h"

namespace tessera::scheduler {

HealthRelay::HealthRelay(std::shared_ptr<HealthClient> health,
                         std::shared_ptr<WorkerRegistry> workers,
                         std::shared_ptr<AttemptTracker> attempts,
                         std::shared_ptr<AttemptControl> control,
                         std::shared_ptr<IdempotentCalls> idem)
    : health_(std::move(health)),
      workers_(std::move(workers)),
      attempts_(std::move(attempts)),
      control_(std::move(control)),
      idem_(std::move(idem)) {}

absl::Status HealthRelay::OnHealthResult(const std::string& node,
                                         const v1::HealthCheckResult& result) {
  if (!health_) return absl::OkStatus();
  v1::HealthCheckResult r = result;
  r.set_node_name(node);  // the stream's node, whatever the message says
  return health_->ReportHealthResult(r);
}

absl::Status HealthRelay::OnGpuFault(const std::string& node, const v1::GpuFault& fault) {
  v1::GpuFault f = fault;
  f.set_node_name(node);
  absl::Status st =
      health_ ? health_->ReportGpuFault(f) : absl::UnavailableError("no health API is configured");
  if (st.ok() || !IsFatalGpuFault(f)) return st;
  // The health API would cordon the node and evict its runs; without it, at least the runs move.
  spdlog::error("GPU fault on {} not taken by the health API ({}): evicting its runs", node,
                st.ToString());
  return control_
      ->EndAttemptsOnNode(node, v1::ATTEMPT_END_REASON_GPU_FAULT, v1::DETECTION_METHOD_GPU_PROBE,
                          absl::StrCat("GPU ", f.gpu_index(), " of ", node, ": ", f.detail()))
      .status();
}

absl::Status HealthRelay::OnRankHang(const std::string& node, const v1::RankHang& hang) {
  // A node reports hangs of its own ranks only: one that names an attempt running elsewhere
  // (an impostor, or whoever took the node) would end another tenant's run, and start a sweep.
  const std::optional<v1::Run> run = attempts_->ActiveRun(hang.run_id(), hang.resumption_index());
  if (run && !attempts_->PlacedOn(hang.run_id(), hang.resumption_index(), node)) {
    return absl::PermissionDeniedError(
        absl::StrFormat("%s reported a hang of rank %d of run %s (attempt %d), which is not "
                        "placed on it: ignored",
                        node, hang.rank(), run->name(), hang.resumption_index()));
  }
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
  req.set_before_first_report(hang.before_first_report());
  req.set_before_first_step(hang.before_first_step());
  absl::Status st = health_ ? health_->ReportRankHang(req)
                            : absl::UnavailableError("no health API is configured");
  if (st.ok()) return st;
  spdlog::error("rank hang on {} not taken by the health API ({}): ending its attempt", node,
                st.ToString());
  if (!run) return absl::OkStatus();  // already ended
  AttemptState state = attempts_->State(run->id(), run->resumption_index());
  state.first_failed_rank = hang.rank();
  state.first_failed_node = node;
  const std::string detail = absl::StrFormat(
      "rank %d on %s made no progress for %.1f s (%s)", hang.rank(), node,
      hang.seconds_without_progress(),
      HangCircumstance(hang.before_first_report(), hang.before_first_step(), hang.last_step()));
  control_->StopAttempt(*run, v1::ATTEMPT_END_REASON_HANG, detail, node,
                        v1::DETECTION_METHOD_HANG_TIMEOUT);
  return control_->EndAttempt(run->id(), run->resumption_index(), state,
                              v1::ATTEMPT_END_REASON_HANG, v1::DETECTION_METHOD_HANG_TIMEOUT,
                              detail);
}

absl::Status HealthRelay::DispatchToWorker(const Who& who, const v1::DispatchToWorkerRequest& req,
                                           v1::DispatchToWorkerResponse*) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "sending commands to workers"));
  if (req.node_name().empty()) return absl::InvalidArgumentError("node_name: required");
  v1::ControlMessage msg;
  msg.set_command_id(control_->NextCommandId());
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

absl::Status HealthRelay::EvictNode(const Who& who, const v1::EvictNodeRequest& req,
                                    v1::EvictNodeResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "evicting a node's runs"));
  if (req.node_name().empty()) return absl::InvalidArgumentError("node_name: required");
  if (req.reason() == v1::ATTEMPT_END_REASON_UNSPECIFIED) {
    return absl::InvalidArgumentError("reason: required");
  }
  return idem_->Run(absl::StrCat("EvictNode/", who.user), req.idempotency_key(), req, resp, [&] {
    TESSERA_ASSIGN_OR_RETURN(auto names, control_->EndAttemptsOnNode(req.node_name(), req.reason(),
                                                                     req.detection_method(),
                                                                     req.detail(), req.run_id()));
    for (auto& n : names) resp->add_run_names(std::move(n));
    return absl::OkStatus();
  });
}

}  // namespace tessera::scheduler
