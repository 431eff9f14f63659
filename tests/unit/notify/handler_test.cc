// NotificationHandler: what a subscription may ask for, who may ask, and who sees what.
#include "tests/unit/notify/notify_fixture.h"

namespace tessera::notify {
namespace handler_test {
using namespace notify_test;  // NOLINT: the fixture is these tests' vocabulary

TEST_CASE("subscriptions are checked: fields, who may ask for a scope, how many") {
  Fixture f;
  const auto create = [&](const auth::Principal& who, auto edit, const std::string& secret = "") {
    v1::CreateSubscriptionRequest req;
    auto* s = req.mutable_subscription();
    s->set_url("https://hooks.example.com/x");
    s->set_format(v1::WEBHOOK_FORMAT_SLACK);
    s->set_scope(v1::SUBSCRIPTION_SCOPE_USER);
    s->add_events(v1::NOTIFICATION_EVENT_RUN_FAILED);
    edit(*s);
    req.set_secret(secret);
    v1::CreateSubscriptionResponse resp;
    return f.handler.CreateSubscription(who, req, &resp);
  };
  const auto nothing = [](v1::Subscription&) {};
  CHECK(create(kAlice, nothing).ok());
  CHECK(create(kAlice, [](auto& s) { s.set_url("http://example.com/"); }).message() ==
        "url: http:// only to a loopback address (127.0.0.1, ::1, localhost), not example.com: "
        "use https://");
  CHECK(create(kAlice, [](auto& s) { s.clear_events(); }).message() == "events: at least one");
  CHECK(create(kAlice, [](auto& s) {
          s.add_events(v1::NOTIFICATION_EVENT_NODE_CORDONED);
        }).message() == "events: NODE_CORDONED is a node event, for the operators scope");
  CHECK(create(kAlice, [](auto& s) {
          s.set_scope(v1::SUBSCRIPTION_SCOPE_OPERATORS);
          s.clear_events();
          s.add_events(v1::NOTIFICATION_EVENT_NODE_CORDONED);
        }).code() == absl::StatusCode::kPermissionDenied);
  CHECK(create(
            kAlice, [](auto& s) { s.set_format(v1::WEBHOOK_FORMAT_GENERIC); }, "short")
            .message() ==
        "secret: the generic format is signed with a secret of 16 to 1024 bytes (5 given)");
  CHECK(create(kAlice, nothing, "0123456789abcdef").message() ==
        "secret: the slack format is not signed (Slack checks its own URL's secret)");
  CHECK(create(kAlice, [](auto& s) { s.set_queue_bound_seconds(-1); }).code() ==
        absl::StatusCode::kInvalidArgument);
  // A team's subscription needs its member.
  f.AddTeam("nlp");
  const auto team = [](auto& s) {
    s.set_scope(v1::SUBSCRIPTION_SCOPE_TEAM);
    s.set_team("nlp");
  };
  CHECK(create(kBob, team).message() == "team: nlp is not your team (only its members subscribe)");
  REQUIRE(f.stores.teams->AddMember("nlp", "bob").ok());
  CHECK(create(kBob, team).ok());
  // Without the server's key, no signed webhook.
  NotificationHandler keyless(f.stores.notifications, f.stores.teams, Sealer{}, f.clock, f.random);
  v1::CreateSubscriptionRequest req;
  req.mutable_subscription()->set_url("https://h.example.com/");
  req.mutable_subscription()->set_format(v1::WEBHOOK_FORMAT_GENERIC);
  req.mutable_subscription()->set_scope(v1::SUBSCRIPTION_SCOPE_USER);
  req.mutable_subscription()->add_events(v1::NOTIFICATION_EVENT_RUN_FAILED);
  req.set_secret("0123456789abcdef");
  v1::CreateSubscriptionResponse resp;
  CHECK(keyless.CreateSubscription(kAlice, req, &resp).code() ==
        absl::StatusCode::kFailedPrecondition);
  // At most kMaxSubscriptionsPerPerson each.
  for (int i = 1; i < kMaxSubscriptionsPerPerson; ++i) REQUIRE(create(kAlice, nothing).ok());
  CHECK(create(kAlice, nothing).message() == "subscriptions: alice has 20, the limit is 20");
}

TEST_CASE("people see and delete their own subscriptions and notifications, admins all") {
  Fixture f;
  const std::string mine =
      f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER, {v1::NOTIFICATION_EVENT_RUN_FAILED});
  f.Subscribe(kBob, v1::SUBSCRIPTION_SCOPE_USER, {v1::NOTIFICATION_EVENT_RUN_FAILED});
  f.Run("gpt-a", "alice");
  f.Run("gpt-b", "bob");
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_FAILED);
  f.Event("gpt-b", v1::RUN_EVENT_TYPE_FAILED);
  REQUIRE(*f.planner.PlanRunEvents() == 2);
  const auto list = [&](const auth::Principal& who) {
    v1::ListSubscriptionsResponse resp;
    REQUIRE(f.handler.ListSubscriptions(who, {}, &resp).ok());
    return resp.subscriptions_size();
  };
  const auto notes = [&](const auth::Principal& who, const std::string& sub = "") {
    v1::ListNotificationsRequest req;
    req.set_subscription_id(sub);
    v1::ListNotificationsResponse resp;
    const absl::Status st = f.handler.ListNotifications(who, req, &resp);
    return st.ok() ? resp.notifications_size() : -static_cast<int>(st.code());
  };
  CHECK(list(kAlice) == 1);
  CHECK(list(kAdmin) == 2);
  CHECK(notes(kAlice) == 1);
  CHECK(notes(kAdmin) == 2);
  CHECK(notes(kAlice, mine) == 1);
  CHECK(notes(kBob, mine) == -static_cast<int>(absl::StatusCode::kNotFound));
  v1::DeleteSubscriptionRequest del;
  del.set_id(mine);
  v1::DeleteSubscriptionResponse deleted;
  CHECK(absl::IsNotFound(f.handler.DeleteSubscription(kBob, del, &deleted)));
  CHECK(f.handler.DeleteSubscription(kAlice, del, &deleted).ok());
  CHECK(list(kAlice) == 0);
  CHECK(notes(kAlice) == 0);
  v1::ListNotificationsRequest huge;
  huge.set_limit(5000);
  v1::ListNotificationsResponse resp;
  CHECK(f.handler.ListNotifications(kAlice, huge, &resp).message() ==
        "limit: between 1 and 1000 (0: 50)");
}

}  // namespace handler_test
}  // namespace tessera::notify
