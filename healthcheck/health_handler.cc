#include "healthcheck/health_handler.h"

#include <spdlog/spdlog.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "healthcheck/sweep_plan.h"
#include "proto/policy/gpu_faults.h"
#include "proto/policy/rank_hang.h"
#include "services/common/rpc.h"

namespace tessera::health {

absl::Status HealthHandler::StartSweep(const Who& who, const v1::StartSweepRequest& req,
                                       v1::StartSweepResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireOperator(who, "starting a health sweep"));
  const v1::SweepTrigger trigger =
      req.trigger() == v1::SWEEP_TRIGGER_UNSPECIFIED ? v1::SWEEP_TRIGGER_ON_DEMAND : req.trigger();
  if (!v1::SweepTrigger_IsValid(trigger)) return absl::InvalidArgumentError("trigger: unknown");
  return idem_->Run(absl::StrCat("StartSweep/", who.user), req.idempotency_key(), req, resp, [&] {
    TESSERA_ASSIGN_OR_RETURN(
        *resp->mutable_sweep(),
        launcher_->CreateSweep({.trigger = trigger,
                                .nodes = {req.node_names().begin(), req.node_names().end()},
                                .requested_by = who.user}));
    return absl::OkStatus();
  });
}

absl::Status HealthHandler::GetSweep(const Who&, const v1::GetSweepRequest& req,
                                     v1::GetSweepResponse* resp) {
  if (req.id().empty()) return absl::InvalidArgumentError("id: required");
  auto sweep = store_->GetSweep(req.id());
  if (absl::IsNotFound(sweep.status())) {
    return absl::NotFoundError(absl::StrCat("no sweep ", req.id()));
  }
  if (!sweep.ok()) return sweep.status();
  *resp->mutable_sweep() = *std::move(sweep);
  TESSERA_ASSIGN_OR_RETURN(auto results, store_->ListResults({}, req.id(), 0));
  for (auto& r : results) *resp->add_results() = std::move(r);
  return absl::OkStatus();
}

absl::Status HealthHandler::ListSweeps(const Who&, const v1::ListSweepsRequest& req,
                                       v1::ListSweepsResponse* resp) {
  if (req.limit() < 0 || req.limit() > 10'000) {
    return absl::InvalidArgumentError("limit: must be between 0 and 10000");
  }
  TESSERA_ASSIGN_OR_RETURN(auto sweeps, store_->ListSweeps(req.limit() == 0 ? 50 : req.limit()));
  for (auto& s : sweeps) *resp->add_sweeps() = std::move(s);
  return absl::OkStatus();
}

absl::Status HealthHandler::ListHealthResults(const Who&, const v1::ListHealthResultsRequest& req,
                                              v1::ListHealthResultsResponse* resp) {
  if (req.limit() < 0 || req.limit() > 10'000) {
    return absl::InvalidArgumentError("limit: must be between 0 and 10000");
  }
  TESSERA_ASSIGN_OR_RETURN(
      auto results, store_->ListResults({req.node_names().begin(), req.node_names().end()},
                                        req.sweep_id(), req.limit() == 0 ? 100 : req.limit()));
  for (auto& r : results) *resp->add_results() = std::move(r);
  return absl::OkStatus();
}

absl::Status HealthHandler::ReportHealthResult(const Who& who,
                                               const v1::ReportHealthResultRequest& req,
                                               v1::ReportHealthResultResponse*) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "reporting health results"));
  const auto& r = req.result();
  if (r.node_name().empty()) return absl::InvalidArgumentError("result.node_name: required");
  if (r.kind() == v1::HEALTH_CHECK_KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError("result.kind: required");
  }
  if (r.step() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("result.step: ", r.step(), " is negative"));
  }
  if (!r.sweep_id().empty()) {
    auto sweep = store_->GetSweep(r.sweep_id());
    if (absl::IsNotFound(sweep.status())) {
      return absl::NotFoundError(absl::StrCat("result.sweep_id: no sweep ", r.sweep_id()));
    }
    if (!sweep.ok()) return sweep.status();
    if (sweep->state() != v1::SWEEP_STATE_RUNNING) return absl::OkStatus();  // too late: timed out
  }
  return store_->AddResult(r).status();
}

absl::Status HealthHandler::ReportGpuFault(const Who& who, const v1::ReportGpuFaultRequest& req,
                                           v1::ReportGpuFaultResponse*) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "reporting GPU faults"));
  const auto& f = req.fault();
  if (f.node_name().empty()) return absl::InvalidArgumentError("fault.node_name: required");
  v1::HealthCheckResult r;
  r.set_node_name(f.node_name());
  r.set_kind(v1::HEALTH_CHECK_KIND_GPU_PROBE);
  r.set_verdict(v1::HEALTH_VERDICT_GPU_FAULT);
  r.set_error(absl::StrCat("GPU ", f.gpu_index(), ": ", f.detail()));
  *r.mutable_started_at() = f.has_time() ? f.time() : ToProtoTime(clock_->Now());
  *r.mutable_finished_at() = r.started_at();
  TESSERA_RETURN_IF_ERROR(store_->AddResult(r).status());
  if (!IsFatalGpuFault(f)) {
    spdlog::warn("GPU fault on {} (not fatal): {}", f.node_name(), r.error());
    return absl::OkStatus();
  }
  google::protobuf::Struct evidence;
  auto& e = *evidence.mutable_fields();
  e["gpu_index"].set_number_value(f.gpu_index());
  e["kind"].set_string_value(v1::GpuFaultKind_Name(f.kind()));
  if (f.xid() != 0) e["xid"].set_number_value(f.xid());
  e["detail"].set_string_value(f.detail());
  e["injected"].set_bool_value(f.injected());
  remediation_->TakeOutOfService(f.node_name(), absl::StrCat(kCordonReasonPrefix, r.error()),
                                 evidence, v1::ATTEMPT_END_REASON_GPU_FAULT,
                                 v1::DETECTION_METHOD_GPU_PROBE);
  return absl::OkStatus();
}

absl::Status HealthHandler::ReportRankHang(const Who& who, const v1::ReportRankHangRequest& req,
                                           v1::ReportRankHangResponse*) {
  TESSERA_RETURN_IF_ERROR(RequireSystem(who, "reporting hung ranks"));
  if (req.node_name().empty()) return absl::InvalidArgumentError("node_name: required");
  if (req.run_id().empty()) return absl::InvalidArgumentError("run_id: required");
  const std::string what = absl::StrFormat(
      "rank %d of run %s (attempt %d) on %s made no progress for %.1f s (%s)", req.rank(),
      req.run_id(), req.resumption_index(), req.node_name(), req.seconds_without_progress(),
      HangCircumstance(req.before_first_report(), req.before_first_step(), req.last_step()));
  // A hang is the run's own signal, which its command controls: it ends and requeues that run
  // only. The node is cordoned (and other tenants' runs evicted) only if an independent check,
  // a sweep of the node, finds it at fault (Remediate); a rank waiting in a collective does not
  // even make the node a suspect.
  v1::EvictNodeRequest evict;
  evict.set_node_name(req.node_name());
  evict.set_reason(v1::ATTEMPT_END_REASON_HANG);
  evict.set_detection_method(v1::DETECTION_METHOD_HANG_TIMEOUT);
  evict.set_run_id(req.run_id());
  if (req.in_collective()) {
    evict.set_detail(what + " while waiting in a collective");
    return scheduler_->EvictNode(evict).status();
  }
  // The suspect is measured beside idle peers, so that "slow" means slower than they are.
  std::vector<std::string> sweep_nodes = {req.node_name()};
  auto nodes = NodesByName(*scheduler_);
  auto running = runs_->ListRunning();
  // The sweep is for the hung run: on the nodes it held, its next attempt (kept off the hung
  // node for a while, Run.avoid_node, unless it names its nodes) is no neighbour whose presence
  // defers a verdict; on a peer it is one (sweep_neighbours.h).
  std::string run_name;
  std::vector<std::string> run_nodes = {req.node_name()};
  if (running.ok()) {
    for (const auto& r : *running) {
      if (r.id() != req.run_id()) continue;
      run_name = r.name();
      for (const auto& n : r.nodes()) {
        if (n.node_name() != req.node_name()) run_nodes.push_back(n.node_name());
      }
    }
  }
  if (nodes.ok() && running.ok()) {
    std::set<std::string> busy = {req.node_name()};
    for (const auto& r : *running) {
      for (const auto& n : r.nodes()) busy.insert(n.node_name());
    }
    for (auto& peer : IdlePeers(*nodes, busy, config_.triggers.max_peers)) {
      sweep_nodes.push_back(std::move(peer));
    }
  }
  auto sweep = launcher_->CreateSweep({.trigger = v1::SWEEP_TRIGGER_HANG,
                                       .nodes = sweep_nodes,
                                       .requested_by = "tessera-health",
                                       .run_name = run_name,
                                       .run_nodes = run_nodes,
                                       .suspect_node = req.node_name(),
                                       .trigger_detail = what});
  evict.set_detail(sweep.ok() ? absl::StrCat(what, "; node checked by sweep ", sweep->id()) : what);
  if (!sweep.ok()) {
    spdlog::warn("no sweep of {} after its hang: {}", req.node_name(), sweep.status().ToString());
  } else {
    spdlog::warn("health: {}: requeued, node {} is checked by sweep {}", what, req.node_name(),
                 sweep->id());
  }
  return scheduler_->EvictNode(evict).status();
}

absl::Status HealthHandler::InjectFault(const Who& who, const v1::InjectFaultRequest& req,
                                        v1::InjectFaultResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireOperator(who, "injecting faults"));
  if (req.node_name().empty()) return absl::InvalidArgumentError("node_name: required");
  if (req.kind() == v1::FAULT_KIND_UNSPECIFIED || !v1::FaultKind_IsValid(req.kind())) {
    return absl::InvalidArgumentError(
        "kind: required (xid, ecc, slow, hang, crash, netdrop, link-down or clear)");
  }
  TESSERA_ASSIGN_OR_RETURN(auto nodes, NodesByName(*scheduler_));
  auto it = nodes.find(req.node_name());
  if (it == nodes.end())
    return absl::NotFoundError(absl::StrCat("no node named ", req.node_name()));
  if (!it->second.fault_injection_allowed()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", req.node_name(),
                     " does not allow fault injection (its worker runs without "
                     "--allow-fault-injection)"));
  }
  return idem_->Run(absl::StrCat("InjectFault/", who.user), req.idempotency_key(), req, resp, [&] {
    v1::DispatchToWorkerRequest d;
    d.set_node_name(req.node_name());
    auto* f = d.mutable_inject_fault();
    f->set_kind(req.kind());
    f->set_factor(req.factor());
    f->set_gpu_index(req.gpu_index());
    f->set_seconds(req.seconds());
    d.set_timeout_seconds(absl::ToDoubleSeconds(config_.dispatch_timeout));
    TESSERA_RETURN_IF_ERROR(scheduler_->DispatchToWorker(d));
    spdlog::warn("{} injected {} into {}", who.user, v1::FaultKind_Name(req.kind()),
                 req.node_name());
    return absl::OkStatus();
  });
}

}  // namespace tessera::health
