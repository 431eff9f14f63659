#include "services/notify/notification_handler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "services/notify/webhook_message.h"

namespace tessera::notify {
namespace {

bool IsNodeEvent(v1::NotificationEvent e) {
  return e == v1::NOTIFICATION_EVENT_NODE_CORDONED || e == v1::NOTIFICATION_EVENT_NODE_RETURNED;
}

std::string NewId(Random& random) {
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string id = "wh-";
  uint64_t r = random.Next();
  for (int i = 0; i < 12; ++i, r /= 36) id.push_back(kDigits[r % 36]);
  return id;
}

// What a person may see: their own, and every one for an admin.
bool MaySee(const auth::Principal& who, const v1::Subscription& s) {
  return who.is_admin() || s.owner() == who.user;
}

}  // namespace

absl::Status ValidateSubscription(const v1::Subscription& s, const std::string& secret) {
  TESSERA_RETURN_IF_ERROR(CheckWebhookUrl(s.url()));
  if (s.scope() == v1::SUBSCRIPTION_SCOPE_UNSPECIFIED ||
      !v1::SubscriptionScope_IsValid(s.scope())) {
    return absl::InvalidArgumentError("scope: user, team or operators");
  }
  if (s.scope() == v1::SUBSCRIPTION_SCOPE_TEAM) {
    if (s.team().empty()) return absl::InvalidArgumentError("team: required for a team's runs");
  } else if (!s.team().empty()) {
    return absl::InvalidArgumentError("team: only for the team scope");
  }
  if (s.events().empty()) return absl::InvalidArgumentError("events: at least one");
  for (const int e : s.events()) {
    if (e == v1::NOTIFICATION_EVENT_UNSPECIFIED || !v1::NotificationEvent_IsValid(e)) {
      return absl::InvalidArgumentError(absl::StrCat("events: ", e, " is not an event"));
    }
    const bool node = IsNodeEvent(static_cast<v1::NotificationEvent>(e));
    if (node != (s.scope() == v1::SUBSCRIPTION_SCOPE_OPERATORS)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "events: ", EventName(static_cast<v1::NotificationEvent>(e)),
          node ? " is a node event, for the operators scope" : " is a run event, not a node's"));
    }
  }
  constexpr double kMaxBound = 30 * 24 * 3600;
  if (s.queue_bound_seconds() < 0 || s.queue_bound_seconds() > kMaxBound ||
      std::isnan(s.queue_bound_seconds())) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue_bound_seconds: between 0 (the default, an hour) and ", kMaxBound));
  }
  switch (s.format()) {
    case v1::WEBHOOK_FORMAT_SLACK:
      if (!secret.empty()) {
        return absl::InvalidArgumentError(
            "secret: the slack format is not signed (Slack checks its own URL's secret)");
      }
      break;
    case v1::WEBHOOK_FORMAT_GENERIC:
      if (secret.size() < kMinSecretBytes || secret.size() > kMaxSecretBytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("secret: the generic format is signed with a secret of ", kMinSecretBytes,
                         " to ", kMaxSecretBytes, " bytes (", secret.size(), " given)"));
      }
      break;
    default:
      return absl::InvalidArgumentError("format: slack or generic");
  }
  return absl::OkStatus();
}

NotificationHandler::NotificationHandler(std::shared_ptr<store::NotificationStore> store,
                                         std::shared_ptr<store::TeamStore> teams, Sealer sealer,
                                         std::shared_ptr<Clock> clock,
                                         std::shared_ptr<Random> random)
    : store_(std::move(store)),
      teams_(std::move(teams)),
      sealer_(std::move(sealer)),
      clock_(std::move(clock)),
      random_(std::move(random)) {}

absl::Status NotificationHandler::CreateSubscription(const Who& who,
                                                     const v1::CreateSubscriptionRequest& req,
                                                     v1::CreateSubscriptionResponse* resp) {
  v1::Subscription s = req.subscription();
  TESSERA_RETURN_IF_ERROR(ValidateSubscription(s, req.secret()));
  if (s.scope() == v1::SUBSCRIPTION_SCOPE_OPERATORS && !who.may_operate_nodes()) {
    return absl::PermissionDeniedError("scope: node events are for operators and admins");
  }
  if (s.scope() == v1::SUBSCRIPTION_SCOPE_TEAM && !who.is_admin()) {
    auto team = teams_->TeamOfUser(who.user);
    if (!team.ok() && !absl::IsNotFound(team.status())) return team.status();
    if (!team.ok() || *team != s.team()) {
      return absl::PermissionDeniedError(
          absl::StrCat("team: ", s.team(), " is not your team (only its members subscribe)"));
    }
  }
  if (!req.secret().empty() && !sealer_.seal) {
    return absl::FailedPreconditionError(
        "secret: this cluster keeps no secrets (the server needs --secrets-key-file)");
  }
  TESSERA_ASSIGN_OR_RETURN(auto existing, store_->ListSubscriptions());
  const auto mine = std::count_if(existing.begin(), existing.end(), [&](const auto& r) {
    return r.subscription.owner() == who.user;
  });
  if (mine >= kMaxSubscriptionsPerPerson) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "subscriptions: ", who.user, " has ", mine, ", the limit is ", kMaxSubscriptionsPerPerson));
  }
  s.set_id(NewId(*random_));
  s.set_owner(who.user);
  *s.mutable_created_at() = ToProtoTime(clock_->Now());
  s.set_signed_deliveries(!req.secret().empty());
  store::SubscriptionRecord record{s, ""};
  if (!req.secret().empty()) {
    TESSERA_ASSIGN_OR_RETURN(record.sealed_secret, sealer_.seal(req.secret(), s.id()));
  }
  TESSERA_RETURN_IF_ERROR(store_->CreateSubscription(record));
  *resp->mutable_subscription() = s;
  return absl::OkStatus();
}

absl::Status NotificationHandler::ListSubscriptions(const Who& who,
                                                    const v1::ListSubscriptionsRequest&,
                                                    v1::ListSubscriptionsResponse* resp) {
  TESSERA_ASSIGN_OR_RETURN(auto all, store_->ListSubscriptions());
  for (const auto& r : all) {
    if (MaySee(who, r.subscription)) *resp->add_subscriptions() = r.subscription;
  }
  return absl::OkStatus();
}

absl::StatusOr<store::SubscriptionRecord> NotificationHandler::Find(const Who& who,
                                                                    const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("id: required");
  TESSERA_ASSIGN_OR_RETURN(auto all, store_->ListSubscriptions());
  for (auto& r : all) {
    // Another person's subscription is as absent as one that never was.
    if (r.subscription.id() == id && MaySee(who, r.subscription)) return std::move(r);
  }
  return absl::NotFoundError(absl::StrCat("subscription ", id, " not found"));
}

absl::Status NotificationHandler::DeleteSubscription(const Who& who,
                                                     const v1::DeleteSubscriptionRequest& req,
                                                     v1::DeleteSubscriptionResponse*) {
  TESSERA_RETURN_IF_ERROR(Find(who, req.id()).status());
  return store_->DeleteSubscription(req.id());
}

absl::Status NotificationHandler::ListNotifications(const Who& who,
                                                    const v1::ListNotificationsRequest& req,
                                                    v1::ListNotificationsResponse* resp) {
  if (req.limit() < 0 || req.limit() > kMaxNotificationsListed) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: between 1 and ", kMaxNotificationsListed, " (0: 50)"));
  }
  store::NotificationFilter filter;
  filter.limit = req.limit() == 0 ? 50 : req.limit();
  if (!req.subscription_id().empty()) {
    TESSERA_RETURN_IF_ERROR(Find(who, req.subscription_id()).status());
    filter.subscription_id = req.subscription_id();
  }
  if (!who.is_admin()) filter.owner = who.user;
  TESSERA_ASSIGN_OR_RETURN(auto notes, store_->ListNotifications(filter));
  for (auto& n : notes) *resp->add_notifications() = std::move(n);
  return absl::OkStatus();
}

}  // namespace tessera::notify
