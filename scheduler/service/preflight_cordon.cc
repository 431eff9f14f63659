#include "scheduler/service/preflight_cordon.h"

#include <spdlog/spdlog.h>

#include <functional>

#include "absl/strings/str_cat.h"
#include "proto/policy/preflight.h"
#include "scheduler/service/node_events.h"
#include "services/store/cas_retry.h"

namespace tessera::scheduler {

namespace {

// Cordons `node` (unless it is already out of service: that reason stays) with `reason`, and an
// event whose evidence `evidence` fills.
absl::Status Cordon(
    store::NodeStore& nodes, const std::string& node, std::string reason,
    const std::function<void(google::protobuf::Map<std::string, google::protobuf::Value>&)>&
        evidence,
    absl::Time now) {
  if (reason.size() > 2048) reason.resize(2048);  // what the cordon service allows a reason
  bool cordoned = false;
  auto updated = store::UpdateNodeWithRetry(
      nodes, node,
      [&](v1::Node& n, std::vector<v1::NodeEvent>& events) -> absl::StatusOr<store::NodeChange> {
        cordoned = false;
        // Someone (a person, the health API) already took it out: their reason stays.
        if (n.admin_state() != v1::NODE_ADMIN_STATE_SCHEDULABLE) return store::NodeChange::kNone;
        n.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
        n.set_status_reason(reason);
        v1::NodeEvent event = SchedulerNodeEvent(node, v1::NODE_EVENT_TYPE_CORDONED, reason, now);
        evidence(*event.mutable_evidence()->mutable_fields());
        events.push_back(std::move(event));
        cordoned = true;
        return store::NodeChange::kWrite;
      });
  if (!updated.ok()) return updated.status();
  if (cordoned) spdlog::warn("node {} cordoned: {}", node, reason);
  return absl::OkStatus();
}

}  // namespace

absl::Status CordonAfterPreflight(store::NodeStore& nodes, const std::string& node,
                                  const v1::Run& run, const PreflightChecks& checks,
                                  absl::Time now) {
  // Everyone may read a node's reason: the run (another user's, to most) is named only in the
  // event's evidence, which only operators see whole.
  return Cordon(
      nodes, node,
      absl::StrCat(
          kPreflightCordonPrefix,
          "failed its pre-flight checks before a run could start: ", FailedPreflightChecks(checks)),
      [&](auto& e) {
        e["run_name"].set_string_value(run.name());
        e["run_id"].set_string_value(run.id());
        e["resumption_index"].set_number_value(run.resumption_index());
        for (const auto& c : checks) {
          e[absl::StrCat("check ", c.name())].set_string_value(
              absl::StrCat(c.passed() ? "passed" : "FAILED", " in ", absl::SixDigits(c.seconds()),
                           " s: ", c.detail()));
        }
      },
      now);
}

absl::Status CordonSpareAfterPreflight(store::NodeStore& nodes, const std::string& node,
                                       const std::string& failed, absl::Time now) {
  return Cordon(
      nodes, node,
      absl::StrCat(kPreflightCordonPrefix, "failed its pre-flight checks as a hot spare: ", failed),
      [&](auto& e) {
        e["spare"].set_bool_value(true);
        e["failed_checks"].set_string_value(failed);
      },
      now);
}

}  // namespace tessera::scheduler
