#include "healthcheck/remediation.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "healthcheck/sweep_launcher.h"

namespace tessera::health {
namespace {

v1::AttemptEndReason CauseOf(v1::HealthVerdict v) {
  switch (v) {
    case v1::HEALTH_VERDICT_SLOW:
      return v1::ATTEMPT_END_REASON_STRAGGLER;
    case v1::HEALTH_VERDICT_GPU_FAULT:
      return v1::ATTEMPT_END_REASON_GPU_FAULT;
    default:
      return v1::ATTEMPT_END_REASON_NODE_FAILURE;
  }
}

}  // namespace

void Remediation::Remediate(v1::Sweep& sweep, const std::vector<Anomaly>& anomalies) {
  const v1::DetectionMethod how = sweep.trigger() == v1::SWEEP_TRIGGER_MFU_DROP
                                      ? v1::DETECTION_METHOD_MFU_DROP
                                      : v1::DETECTION_METHOD_CANARY_SWEEP;
  // Who shares the nodes now, looked at once for all of this stage's verdicts.
  if (!anomalies.empty()) neighbours_->Observe(sweep);
  for (const auto& a : anomalies) {
    if (std::find(sweep.anomalous_nodes().begin(), sweep.anomalous_nodes().end(), a.node) !=
        sweep.anomalous_nodes().end()) {
      continue;  // taken out at an earlier stage
    }
    if (DeferredVerdicts::DeferredIn(sweep, a.node)) continue;  // at an earlier stage
    if (const std::set<std::string> others = neighbours_->On(sweep, a.node); !others.empty()) {
      deferred_->Defer(sweep, a, others);
      continue;
    }
    sweep.add_anomalous_nodes(a.node);
    sweep.add_findings(a.finding);
    if (metrics_) metrics_->Condemned(a.verdict);
    google::protobuf::Struct evidence;
    auto& e = *evidence.mutable_fields();
    e["sweep_id"].set_string_value(sweep.id());
    e["trigger"].set_string_value(v1::SweepTrigger_Name(sweep.trigger()));
    e["verdict"].set_string_value(v1::HealthVerdict_Name(a.verdict));
    e["finding"].set_string_value(a.finding);
    if (!sweep.run_name().empty()) e["run_name"].set_string_value(sweep.run_name());
    if (!sweep.trigger_detail().empty()) {
      e["trigger_detail"].set_string_value(sweep.trigger_detail());
    }
    for (const auto& [k, v] : a.evidence) e[k].set_number_value(v);
    TakeOutOfService(a.node,
                     absl::StrCat(kCordonReasonPrefix, "sweep ", sweep.id(), ": ", a.finding),
                     evidence, CauseOf(a.verdict), how);
  }
}

void Remediation::TakeOutOfService(const std::string& node, const std::string& reason,
                                   const google::protobuf::Struct& evidence,
                                   v1::AttemptEndReason cause, v1::DetectionMethod how) {
  if (auto st = cordon_->Cordon(node, reason, evidence); !st.ok()) {
    spdlog::error("health: cordoning {} failed: {}", node, st.ToString());
  }
  v1::EvictNodeRequest req;
  req.set_node_name(node);
  req.set_reason(cause);
  req.set_detection_method(how);
  req.set_detail(reason.substr(sizeof(kCordonReasonPrefix) - 1));
  auto evicted = scheduler_->EvictNode(req);
  if (!evicted.ok()) {
    spdlog::error("health: evicting the runs of {} failed: {}", node, evicted.status().ToString());
  } else if (!evicted->empty()) {
    spdlog::warn("health: {} out of service; requeued {}", node, absl::StrJoin(*evicted, ", "));
  }
}

void Remediation::ReturnToService(const v1::Sweep& finished) {
  auto nodes = NodesByName(*scheduler_);
  if (!nodes.ok()) return;
  deferred_->ReturnPassed(finished, *nodes);
  if (uncordon_after_passes_ <= 0) return;
  auto sweeps = store_->ListSweeps(500);
  if (!sweeps.ok()) return;
  for (const auto& name : finished.node_names()) {
    auto it = nodes->find(name);
    if (it == nodes->end() || it->second.admin_state() != v1::NODE_ADMIN_STATE_CORDONED ||
        it->second.status_reason().rfind(kCordonReasonPrefix, 0) != 0) {
      continue;  // not ours to return
    }
    int passes = 0;
    for (const auto& s : *sweeps) {  // newest first
      if (s.state() != v1::SWEEP_STATE_FINISHED) continue;
      if (std::find(s.node_names().begin(), s.node_names().end(), name) == s.node_names().end()) {
        continue;
      }
      const auto named = [&name](const auto& list) {
        return std::find(list.begin(), list.end(), name) != list.end();
      };
      if (named(s.anomalous_nodes()) || named(s.repeat_nodes())) break;  // found at fault or slow
      ++passes;
    }
    if (passes >= uncordon_after_passes_) {
      auto st = cordon_->Uncordon(
          name, absl::StrCat(kCordonReasonPrefix, "passed ", passes, " sweeps in a row"));
      if (st.ok()) {
        spdlog::info("health: {} returned to service after {} passing sweeps", name, passes);
      }
    }
  }
}

}  // namespace tessera::health
