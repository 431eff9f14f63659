#include "healthcheck/sweep_launcher.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "healthcheck/deferred_verdicts.h"
#include "healthcheck/sweep_plan.h"

namespace tessera::health {

absl::StatusOr<std::map<std::string, v1::Node>> NodesByName(SchedulerApi& scheduler) {
  TESSERA_ASSIGN_OR_RETURN(auto nodes, scheduler.ListNodes());
  std::map<std::string, v1::Node> by_name;
  for (auto& n : nodes) by_name[n.name()] = std::move(n);
  return by_name;
}

bool ReadyForChecking(const v1::Node& node) {
  if (node.liveness() != v1::NODE_LIVENESS_ONLINE) return false;
  const bool ours = node.admin_state() == v1::NODE_ADMIN_STATE_CORDONED &&
                    node.status_reason().rfind(kCordonReasonPrefix, 0) == 0;
  return node.admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE || ours;
}

std::string SweepLauncher::NewSweepId() {
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string id = "sw-";
  uint64_t r = random_->Next();
  for (int i = 0; i < 10; ++i, r /= 36) id.push_back(kDigits[r % 36]);
  return id;
}

absl::StatusOr<v1::Sweep> SweepLauncher::CreateSweep(SweepRequest request) {
  TESSERA_ASSIGN_OR_RETURN(auto known, NodesByName(*scheduler_));
  std::vector<std::string>& nodes = request.nodes;
  if (nodes.empty()) {
    for (const auto& [name, n] : known) {
      if (ReadyForChecking(n)) nodes.push_back(name);
    }
    if (nodes.empty()) return absl::FailedPreconditionError("no node is ready for checking");
  }
  std::vector<v1::Node> chosen;
  for (const auto& name : nodes) {
    auto it = known.find(name);
    if (it == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("node_names: no node named ", name));
    }
    if (it->second.liveness() != v1::NODE_LIVENESS_ONLINE) {
      return absl::InvalidArgumentError(absl::StrCat("node_names: node ", name, " is ",
                                                     v1::NodeLiveness_Name(it->second.liveness()),
                                                     ", not online"));
    }
    bool seen = false;
    for (const auto& c : chosen) seen = seen || c.name() == name;
    if (!seen) chosen.push_back(it->second);
  }
  v1::Sweep sweep;
  sweep.set_id(NewSweepId());
  sweep.set_trigger(request.trigger);
  sweep.set_state(v1::SWEEP_STATE_RUNNING);
  for (const auto& n : NeighbourOrder(chosen)) sweep.add_node_names(n.name());
  *sweep.mutable_created_at() = ToProtoTime(clock_->Now());
  sweep.set_requested_by(request.requested_by);
  sweep.set_run_name(request.run_name);
  for (auto& n : request.run_nodes) sweep.add_run_nodes(std::move(n));
  sweep.set_suspect_node(request.suspect_node);
  sweep.set_trigger_detail(request.trigger_detail);
  sweep.set_expected_results(
      ExpectedResults({sweep.node_names().begin(), sweep.node_names().end()}));
  TESSERA_RETURN_IF_ERROR(store_->CreateSweep(sweep));
  spdlog::info("sweep {} ({}) of {} node(s){}", sweep.id(), v1::SweepTrigger_Name(request.trigger),
               sweep.node_names_size(),
               request.run_name.empty() ? "" : " for run " + request.run_name);
  return sweep;
}

}  // namespace tessera::health
