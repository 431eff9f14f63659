#include "services/cordon/cordon_handler.h"

#include <spdlog/spdlog.h>

#include <deque>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "services/common/rpc.h"
#include "services/store/cas_retry.h"

namespace tessera::cordon {
namespace {

absl::Status ValidateNodeName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("node_name: required");
  if (name.size() > 253) return absl::InvalidArgumentError("node_name: at most 253 characters");
  return absl::OkStatus();
}

absl::Status ValidateReason(const std::string& reason, bool required) {
  if (required && reason.empty()) {
    return absl::InvalidArgumentError("reason: required (say why, for the node's history)");
  }
  if (reason.size() > 2048) return absl::InvalidArgumentError("reason: at most 2048 characters");
  return absl::OkStatus();
}

absl::Status ValidateFilter(const v1::NodeEventFilter& f) {
  if (f.limit() < 0 || f.limit() > 10'000) {
    return absl::InvalidArgumentError("filter.limit: must be between 0 and 10000");
  }
  if (f.after_id() < 0) return absl::InvalidArgumentError("filter.after_id: must not be negative");
  for (int t : f.types()) {
    if (!v1::NodeEventType_IsValid(t) || t == 0) {
      return absl::InvalidArgumentError(absl::StrCat("filter.types: unknown type ", t));
    }
  }
  return absl::OkStatus();
}

const char* Verb(v1::NodeAdminState s) {
  switch (s) {
    case v1::NODE_ADMIN_STATE_CORDONED:
      return "cordoned";
    case v1::NODE_ADMIN_STATE_DRAINING:
      return "draining";
    default:
      return "schedulable";
  }
}

}  // namespace

v1::Actor ActorFor(const auth::Principal& who) {
  v1::Actor actor;
  actor.set_name(who.user);
  if (!who.is_system()) {
    actor.set_kind(v1::ACTOR_KIND_PERSON);
  } else if (who.user == "health-api") {
    actor.set_kind(v1::ACTOR_KIND_HEALTH_API);
  } else {
    actor.set_kind(v1::ACTOR_KIND_SYSTEM);
  }
  return actor;
}

CordonHandler::CordonHandler(std::shared_ptr<store::NodeStore> nodes,
                             std::shared_ptr<store::NodeEventStore> events,
                             std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<Clock> clock,
                             std::shared_ptr<store::ChangeFeed> changes)
    : nodes_(std::move(nodes)),
      events_(std::move(events)),
      idem_(std::move(idem)),
      clock_(std::move(clock)),
      changes_(changes ? std::move(changes) : std::make_shared<store::ChangeFeed>()) {}

absl::Status CordonHandler::Change(const Who& who, const std::string& node_name,
                                   v1::NodeAdminState state, v1::NodeEventType type,
                                   const std::string& reason,
                                   const google::protobuf::Struct* evidence, v1::Node* node_out,
                                   v1::NodeEvent* event_out) {
  v1::NodeEvent event;
  bool changed = false;
  auto node = store::UpdateNodeWithRetry(
      *nodes_, node_name,
      [&](v1::Node& next, std::vector<v1::NodeEvent>& events) -> absl::StatusOr<store::NodeChange> {
        event.Clear();
        event.set_node_name(node_name);
        event.set_type(type);
        *event.mutable_time() = ToProtoTime(clock_->Now());
        *event.mutable_actor() = ActorFor(who);
        event.set_reason(reason);
        if (evidence) *event.mutable_evidence() = *evidence;
        // Already so: a repeated request records nothing new.
        changed = next.admin_state() != state || next.status_reason() != reason;
        if (!changed) return store::NodeChange::kNone;
        next.set_admin_state(state);
        next.set_status_reason(state == v1::NODE_ADMIN_STATE_SCHEDULABLE ? "" : reason);
        // An operator who uncordons vouches for the hardware again.
        if (state == v1::NODE_ADMIN_STATE_SCHEDULABLE) next.set_health(v1::NODE_HEALTH_HEALTHY);
        events.push_back(event);
        return store::NodeChange::kWrite;
      });
  if (!node.ok()) return node.status();
  if (changed) spdlog::info("node {} {} by {}: {}", node_name, Verb(state), who.user, reason);
  *node_out = *std::move(node);
  *event_out = event;
  return absl::OkStatus();
}

absl::Status CordonHandler::CordonNode(const Who& who, const v1::CordonNodeRequest& req,
                                       v1::CordonNodeResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireOperator(who, "cordoning a node"));
  TESSERA_RETURN_IF_ERROR(ValidateNodeName(req.node_name()));
  TESSERA_RETURN_IF_ERROR(ValidateReason(req.reason(), true));
  return idem_->Run(absl::StrCat("CordonNode/", who.user), req.idempotency_key(), req, resp, [&] {
    return Change(who, req.node_name(), v1::NODE_ADMIN_STATE_CORDONED, v1::NODE_EVENT_TYPE_CORDONED,
                  req.reason(), req.has_evidence() ? &req.evidence() : nullptr,
                  resp->mutable_node(), resp->mutable_event());
  });
}

absl::Status CordonHandler::UncordonNode(const Who& who, const v1::UncordonNodeRequest& req,
                                         v1::UncordonNodeResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireOperator(who, "uncordoning a node"));
  TESSERA_RETURN_IF_ERROR(ValidateNodeName(req.node_name()));
  TESSERA_RETURN_IF_ERROR(ValidateReason(req.reason(), false));
  return idem_->Run(absl::StrCat("UncordonNode/", who.user), req.idempotency_key(), req, resp, [&] {
    return Change(who, req.node_name(), v1::NODE_ADMIN_STATE_SCHEDULABLE,
                  v1::NODE_EVENT_TYPE_UNCORDONED, req.reason(), nullptr, resp->mutable_node(),
                  resp->mutable_event());
  });
}

absl::Status CordonHandler::DrainNode(const Who& who, const v1::DrainNodeRequest& req,
                                      v1::DrainNodeResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireOperator(who, "draining a node"));
  TESSERA_RETURN_IF_ERROR(ValidateNodeName(req.node_name()));
  TESSERA_RETURN_IF_ERROR(ValidateReason(req.reason(), false));
  return idem_->Run(absl::StrCat("DrainNode/", who.user), req.idempotency_key(), req, resp, [&] {
    return Change(who, req.node_name(), v1::NODE_ADMIN_STATE_DRAINING, v1::NODE_EVENT_TYPE_DRAINING,
                  req.reason().empty() ? "drain requested" : req.reason(), nullptr,
                  resp->mutable_node(), resp->mutable_event());
  });
}

v1::NodeEvent CordonHandler::AsSeenBy(const Who& who, v1::NodeEvent event) {
  if (who.may_operate_nodes()) return event;
  // Evidence may name the run that made a node a suspect (a hang, an MFU drop): another user's.
  auto& fields = *event.mutable_evidence()->mutable_fields();
  for (const char* key : {"run_id", "run_name", "trigger_detail"}) fields.erase(key);
  return event;
}

absl::Status CordonHandler::ListNodeEvents(const Who& who, const v1::ListNodeEventsRequest& req,
                                           v1::ListNodeEventsResponse* resp) {
  TESSERA_RETURN_IF_ERROR(ValidateFilter(req.filter()));
  auto events = events_->ListNodeEvents(req.filter());
  if (!events.ok()) return events.status();
  for (auto& e : *events) *resp->add_events() = AsSeenBy(who, std::move(e));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NodeEventWatch>> CordonHandler::OpenWatch(
    const Who& who, const v1::WatchNodeEventsRequest& req, absl::Duration poll_interval) {
  TESSERA_RETURN_IF_ERROR(ValidateFilter(req.filter()));
  return std::make_unique<NodeEventWatch>(events_, changes_, clock_, who, req.filter(),
                                          poll_interval);
}

absl::Status CordonHandler::WatchNodeEvents(const Who& who, const v1::WatchNodeEventsRequest& req,
                                            const std::function<bool(const v1::NodeEvent&)>& send,
                                            const std::function<bool()>& done,
                                            absl::Duration poll_interval) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<NodeEventWatch> watch,
                           OpenWatch(who, req, poll_interval));
  return DriveOnThisThread<v1::NodeEvent>(*watch, *changes_, store::ChangeTopic::kNodeEvents,
                                          *clock_, send, done);
}

}  // namespace tessera::cordon
