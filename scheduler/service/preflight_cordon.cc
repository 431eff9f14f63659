#include "scheduler/service/preflight_cordon.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "proto/policy/preflight.h"
#include "scheduler/service/node_events.h"

namespace tessera::scheduler {

absl::Status CordonAfterPreflight(store::NodeStore& nodes, const std::string& node,
                                  const v1::Run& run, const PreflightChecks& checks,
                                  absl::Time now) {
  std::string reason =
      absl::StrCat(kPreflightCordonPrefix, "failed its pre-flight checks before run ", run.name(),
                   " could start: ", FailedPreflightChecks(checks));
  if (reason.size() > 2048) reason.resize(2048);  // what the cordon service allows a reason
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto current = nodes.GetNode(node);
    if (!current.ok()) return current.status();
    if (current->admin_state() != v1::NODE_ADMIN_STATE_SCHEDULABLE) return absl::OkStatus();
    v1::Node cordoned = *current;
    cordoned.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
    cordoned.set_status_reason(reason);
    v1::NodeEvent event = SchedulerNodeEvent(node, v1::NODE_EVENT_TYPE_CORDONED, reason, now);
    auto& e = *event.mutable_evidence()->mutable_fields();
    e["run_name"].set_string_value(run.name());
    e["run_id"].set_string_value(run.id());
    e["resumption_index"].set_number_value(run.resumption_index());
    for (const auto& c : checks) {
      e[absl::StrCat("check ", c.name())].set_string_value(
          absl::StrCat(c.passed() ? "passed" : "FAILED", " in ", absl::SixDigits(c.seconds()),
                       " s: ", c.detail()));
    }
    auto updated = nodes.UpdateNode(cordoned, current->version(), {event});
    if (updated.ok()) {
      spdlog::warn("node {} cordoned: {}", node, reason);
      return absl::OkStatus();
    }
    if (!absl::IsAborted(updated.status())) return updated.status();
  }
  return absl::AbortedError(absl::StrCat("node ", node, " kept changing; not cordoned"));
}

}  // namespace tessera::scheduler
