#include "healthcheck/remediation.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/timestamps.h"
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

v1::DetectionMethod DetectedBy(const v1::Sweep& sweep) {
  return sweep.trigger() == v1::SWEEP_TRIGGER_MFU_DROP ? v1::DETECTION_METHOD_MFU_DROP
                                                       : v1::DETECTION_METHOD_CANARY_SWEEP;
}

std::string CordonReason(const std::string& sweep_id, const std::string& finding) {
  return absl::StrCat(kCordonReasonPrefix, "sweep ", sweep_id, ": ", finding);
}

// What every cordon a sweep makes carries: the sweep, its trigger, the verdict and finding, and
// the figures.
google::protobuf::Struct SweepEvidence(const v1::Sweep& sweep, v1::HealthVerdict verdict,
                                       const std::string& finding,
                                       const std::map<std::string, double>& figures) {
  google::protobuf::Struct evidence;
  auto& e = *evidence.mutable_fields();
  e["sweep_id"].set_string_value(sweep.id());
  e["trigger"].set_string_value(v1::SweepTrigger_Name(sweep.trigger()));
  e["verdict"].set_string_value(v1::HealthVerdict_Name(verdict));
  e["finding"].set_string_value(finding);
  if (!sweep.run_name().empty()) e["run_name"].set_string_value(sweep.run_name());
  if (!sweep.trigger_detail().empty()) e["trigger_detail"].set_string_value(sweep.trigger_detail());
  for (const auto& [k, v] : figures) e[k].set_number_value(v);
  return evidence;
}

bool Named(const google::protobuf::RepeatedPtrField<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// The nodes cordoned together with `node` (itself included), when its cordon is a fabric
// fault's of one of `sweeps`; just `node` otherwise.
std::vector<std::string> CordonedWith(const std::vector<v1::Sweep>& sweeps, const v1::Node& node) {
  for (const auto& s : sweeps) {
    for (const auto& f : s.fabric_faults()) {
      if (Named(f.nodes(), node.name()) &&
          node.status_reason() == CordonReason(s.id(), f.finding())) {
        return {f.nodes().begin(), f.nodes().end()};
      }
    }
  }
  return {node.name()};
}

}  // namespace

bool Remediation::TakeOutFabric(v1::Sweep& sweep, const NamedFabricFault& f) {
  for (const auto& node : f.fault.nodes()) {
    if (Named(sweep.anomalous_nodes(), node) || DeferredVerdicts::DeferredIn(sweep, node) ||
        !neighbours_->On(sweep, node).empty()) {
      return false;
    }
  }
  *sweep.add_fabric_faults() = f.fault;
  sweep.add_findings(f.fault.finding());
  if (metrics_) metrics_->FabricFault(f.fault.label());
  google::protobuf::Struct evidence =
      SweepEvidence(sweep, f.fault.verdict(), f.fault.finding(), f.evidence);
  auto& e = *evidence.mutable_fields();
  e["fabric_label"].set_string_value(f.fault.label());
  e["fabric_value"].set_string_value(f.fault.value());
  e["fabric_nodes_named"].set_string_value(absl::StrJoin(f.fault.nodes(), ","));
  for (int i = 0; i < f.fault.pairs_size(); ++i) {
    e[absl::StrCat("fabric_pair_", i + 1)].set_string_value(f.fault.pairs(i));
  }
  const std::string reason = CordonReason(sweep.id(), f.fault.finding());
  for (const auto& node : f.fault.nodes()) {
    sweep.add_anomalous_nodes(node);
    if (metrics_) metrics_->Condemned(f.fault.verdict());
    TakeOutOfService(node, reason, evidence, v1::ATTEMPT_END_REASON_NODE_FAILURE,
                     DetectedBy(sweep));
  }
  spdlog::warn("health: sweep {}: {}", sweep.id(), f.fault.finding());
  return true;
}

void Remediation::Remediate(v1::Sweep& sweep, const std::vector<Anomaly>& anomalies,
                            const std::vector<NamedFabricFault>& fabric) {
  const v1::DetectionMethod how = DetectedBy(sweep);
  // Who shares the nodes now, looked at once for all of this stage's verdicts.
  if (!anomalies.empty() || !fabric.empty()) neighbours_->Observe(sweep);
  for (const auto& f : fabric) TakeOutFabric(sweep, f);
  for (const auto& a : anomalies) {
    if (Named(sweep.anomalous_nodes(), a.node)) continue;       // taken out at an earlier stage
    if (DeferredVerdicts::DeferredIn(sweep, a.node)) continue;  // at an earlier stage
    if (const std::set<std::string> others = neighbours_->On(sweep, a.node); !others.empty()) {
      deferred_->Defer(sweep, a, others);
      continue;
    }
    sweep.add_anomalous_nodes(a.node);
    sweep.add_findings(a.finding);
    if (metrics_) metrics_->Condemned(a.verdict);
    TakeOutOfService(a.node, CordonReason(sweep.id(), a.finding),
                     SweepEvidence(sweep, a.verdict, a.finding, a.evidence), CauseOf(a.verdict),
                     how);
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

std::vector<std::string> Remediation::PassedBy(const v1::Sweep& finished) {
  std::vector<std::string> passed;
  for (const auto& node : finished.node_names()) {
    if (Named(finished.anomalous_nodes(), node) || Named(finished.repeat_nodes(), node) ||
        Named(finished.inconclusive_nodes(), node) || NotMeasuredIn(finished, node) ||
        DeferredVerdicts::DeferredIn(finished, node)) {
      continue;
    }
    passed.push_back(node);
  }
  return passed;
}

void Remediation::ReturnToService(const v1::Sweep& finished) {
  if (const auto passed = PassedBy(finished); !passed.empty()) {
    auto cleared =
        runs_->ClearNodeAvoidance(passed, finished.id(), FromProtoTime(finished.finished_at()));
    if (!cleared.ok()) {  // they keep off the nodes for the avoidance's while instead
      spdlog::warn("health: runs keeping off nodes sweep {} passed still do: {}", finished.id(),
                   cleared.status().ToString());
    } else if (!cleared->empty()) {
      spdlog::info("health: sweep {} passed the nodes {} kept off: {}", finished.id(),
                   absl::StrJoin(*cleared, ", "), absl::StrJoin(passed, ", "));
    }
  }
  auto nodes = NodesByName(*scheduler_);
  if (!nodes.ok()) return;
  deferred_->ReturnPassed(finished, *nodes);
  if (uncordon_after_passes_ <= 0) return;
  auto sweeps = store_->ListSweeps(500);
  if (!sweeps.ok()) return;
  // Cordoned by the health API, and not since by anyone else.
  const auto ours = [&](const std::string& name) -> const v1::Node* {
    auto it = nodes->find(name);
    if (it == nodes->end() || it->second.admin_state() != v1::NODE_ADMIN_STATE_CORDONED ||
        it->second.status_reason().rfind(kCordonReasonPrefix, 0) != 0) {
      return nullptr;
    }
    return &it->second;
  };
  // Finished sweeps in a row, newest first, that included the node and found nothing on it (one
  // that could not reach it neither counts nor breaks the row).
  const auto passes = [&](const std::string& name) {
    int n = 0;
    for (const auto& s : *sweeps) {  // newest first
      if (s.state() != v1::SWEEP_STATE_FINISHED || !Named(s.node_names(), name) ||
          NotMeasuredIn(s, name)) {
        continue;
      }
      if (Named(s.anomalous_nodes(), name) || Named(s.repeat_nodes(), name)) break;
      ++n;
    }
    return n;
  };
  std::set<std::string> looked_at;
  for (const auto& name : finished.node_names()) {
    const v1::Node* node = ours(name);
    if (node == nullptr || looked_at.count(name)) continue;
    // A fabric fault's nodes return together: all that still hold its cordon must have passed.
    std::vector<std::pair<std::string, int>> together;
    bool all_passed = true;
    for (const auto& member : CordonedWith(*sweeps, *node)) {
      const v1::Node* m = ours(member);
      if (m == nullptr || m->status_reason() != node->status_reason()) continue;
      looked_at.insert(member);
      together.emplace_back(member, passes(member));
      all_passed = all_passed && together.back().second >= uncordon_after_passes_;
    }
    if (!all_passed) continue;
    const std::string with = together.size() > 1
                                 ? absl::StrCat(", with the ", together.size() - 1,
                                                " other node(s) of ", "the same fabric fault")
                                 : "";
    for (const auto& [member, n] : together) {
      auto st = cordon_->Uncordon(
          member, absl::StrCat(kCordonReasonPrefix, "passed ", n, " sweeps in a row", with));
      if (st.ok()) {
        spdlog::info("health: {} returned to service after {} passing sweeps{}", member, n, with);
      }
    }
  }
}

}  // namespace tessera::health
