// NotificationStore: subscriptions, the planners' cursors, notifications written once, and what
// is due delivered in order per subject.
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace notifications_conformance {

SubscriptionRecord Subscription(const std::string& id, const std::string& owner, int64_t second,
                                const std::string& sealed = "") {
  SubscriptionRecord r;
  r.subscription.set_id(id);
  r.subscription.set_owner(owner);
  r.subscription.set_scope(v1::SUBSCRIPTION_SCOPE_USER);
  r.subscription.set_url("https://hooks.example.com/" + id);
  r.subscription.set_format(v1::WEBHOOK_FORMAT_GENERIC);
  r.subscription.add_events(v1::NOTIFICATION_EVENT_RUN_FAILED);
  *r.subscription.mutable_created_at() = ToProtoTime(T(second));
  r.sealed_secret = sealed;
  return r;
}

NewNotification Note(const std::string& subscription, const std::string& subject,
                     const std::string& key, int64_t second, const std::string& owner = "alice") {
  NewNotification n;
  n.notification.set_subscription_id(subscription);
  n.notification.set_owner(owner);
  n.notification.set_event(v1::NOTIFICATION_EVENT_RUN_FAILED);
  n.notification.set_subject(subject);
  n.notification.set_text(subject + " " + key);
  *n.notification.mutable_created_at() = ToProtoTime(T(second));
  n.dedupe_key = key;
  return n;
}

NotificationFilter Filter(const std::string& owner, const std::string& subscription = "",
                          int limit = 50) {
  NotificationFilter f;
  f.owner = owner;
  f.subscription_id = subscription;
  f.limit = limit;
  return f;
}

std::vector<std::string> Texts(const std::vector<v1::Notification>& notes) {
  std::vector<std::string> out;
  for (const auto& n : notes) out.push_back(n.text());
  return out;
}

CONFORMANCE_CASE("subscriptions are created once, listed oldest first, deleted") {
  Stores s = FreshStores();
  auto& store = *s.notifications;
  REQUIRE(
      store.CreateSubscription(Subscription("sub-b", "bob", 20, std::string("\0k\xff", 3))).ok());
  REQUIRE(store.CreateSubscription(Subscription("sub-a", "alice", 10)).ok());
  CHECK(absl::IsAlreadyExists(store.CreateSubscription(Subscription("sub-a", "carol", 30))));
  auto subs = store.ListSubscriptions();
  REQUIRE(subs.ok());
  REQUIRE(subs->size() == 2);
  CHECK((*subs)[0].subscription.id() == "sub-a");
  CHECK((*subs)[0].sealed_secret.empty());
  CHECK((*subs)[1].subscription.owner() == "bob");
  CHECK((*subs)[1].sealed_secret == std::string("\0k\xff", 3));  // bytes, kept exactly
  CHECK(store.DeleteSubscription("sub-a").ok());
  CHECK(absl::IsNotFound(store.DeleteSubscription("sub-a")));
  CHECK(store.ListSubscriptions()->size() == 1);
}

CONFORMANCE_CASE(
    "a planner's cursor moves with its notifications, once, and only from where it is") {
  Stores s = FreshStores();
  auto& store = *s.notifications;
  REQUIRE(store.CreateSubscription(Subscription("sub-a", "alice", 1)).ok());
  CHECK(*store.Cursor("run-events") == 0);
  auto written = store.Enqueue("run-events", 0, 7,
                               {Note("sub-a", "run/r1", "event/3", 5),
                                Note("sub-a", "run/r1", "event/3", 5),       // the same key: once
                                Note("sub-gone", "run/r1", "event/4", 5)});  // no subscription
  REQUIRE(written.ok());
  CHECK(*written == 1);
  CHECK(*store.Cursor("run-events") == 7);
  CHECK(*store.Cursor("node-events") == 0);  // cursors are per source
  // A second planner that read the cursor before the move is refused and writes nothing.
  CHECK(absl::IsAborted(
      store.Enqueue("run-events", 0, 9, {Note("sub-a", "run/r2", "event/8", 6)}).status()));
  // Planned again after a crash: the key was written already.
  CHECK(*store.Enqueue("run-events", 7, 9, {Note("sub-a", "run/r1", "event/3", 5)}) == 0);
  auto all = store.ListNotifications({});
  REQUIRE(all.ok());
  REQUIRE(all->size() == 1);
  CHECK((*all)[0].state() == v1::NOTIFICATION_STATE_PENDING);
  CHECK((*all)[0].id() > 0);
  CHECK(FromProtoTime((*all)[0].next_attempt_at()) == T(5));
}

CONFORMANCE_CASE("what is due: each subject's oldest pending notification, in order") {
  Stores s = FreshStores();
  auto& store = *s.notifications;
  REQUIRE(store.CreateSubscription(Subscription("sub-a", "alice", 1)).ok());
  REQUIRE(store.CreateSubscription(Subscription("sub-b", "bob", 2)).ok());
  REQUIRE(
      store
          .Enqueue("run-events", 0, 5,
                   {Note("sub-a", "run/r1", "event/1", 10), Note("sub-a", "run/r2", "event/2", 11),
                    Note("sub-a", "run/r1", "event/3", 12),
                    Note("sub-b", "run/r1", "event/1", 10, "bob")})
          .ok());
  CHECK(*store.NextDue() == T(10));
  CHECK(store.DueNotifications(T(9), 10)->empty());
  auto due = store.DueNotifications(T(20), 10);
  REQUIRE(due.ok());
  // r1's second notification waits behind its first; every subscription has its own order.
  CHECK(Texts(*due) ==
        std::vector<std::string>{"run/r1 event/1", "run/r2 event/2", "run/r1 event/1"});
  CHECK(due->at(0).subscription_id() == "sub-a");
  CHECK(due->at(2).subscription_id() == "sub-b");
  CHECK(store.DueNotifications(T(20), 2)->size() == 2);
  CHECK(Texts(*store.PendingOfSubject("sub-a", "run/r1", 2)) ==
        std::vector<std::string>{"run/r1 event/1", "run/r1 event/3"});
  CHECK(store.PendingOfSubject("sub-a", "run/r1", 1)->size() == 1);

  // The first fails: retried later, and r1's next still waits for it.
  v1::Notification first = due->at(0);
  first.set_attempts(1);
  first.set_last_error("HTTP 500");
  *first.mutable_next_attempt_at() = ToProtoTime(T(30));
  REQUIRE(store.UpdateNotification(first).ok());
  CHECK(Texts(*store.DueNotifications(T(20), 10)) ==
        std::vector<std::string>{"run/r2 event/2", "run/r1 event/1"});
  CHECK(*store.NextDue() == T(10));  // sub-b's and r2's heads are due already
  // Delivered: r1's next is the head now, due since it was written.
  first.set_state(v1::NOTIFICATION_STATE_DELIVERED);
  first.set_attempts(2);
  *first.mutable_delivered_at() = ToProtoTime(T(31));
  REQUIRE(store.UpdateNotification(first).ok());
  // (sub-a's r2, sub-a's r1 next, sub-b's r1: by id.)
  CHECK(Texts(*store.DueNotifications(T(31), 10)) ==
        std::vector<std::string>{"run/r2 event/2", "run/r1 event/3", "run/r1 event/1"});
  auto listed = store.ListNotifications(Filter("alice"));
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 3);  // newest first
  CHECK(listed->back().state() == v1::NOTIFICATION_STATE_DELIVERED);
  CHECK(listed->back().attempts() == 2);
  CHECK(listed->back().last_error() == "HTTP 500");
  CHECK(FromProtoTime(listed->back().delivered_at()) == T(31));
  CHECK(listed->front().text() == "run/r1 event/3");
  CHECK(store.ListNotifications(Filter("", "sub-b"))->size() == 1);
  CHECK(store.ListNotifications(Filter("", "", 1))->size() == 1);

  // A subject's pending ones, in order: r1's first was delivered, its second is next.
  auto r1 = store.PendingOfSubject("sub-a", "run/r1", 5);
  REQUIRE(r1.ok());
  CHECK(Texts(*r1) == std::vector<std::string>{"run/r1 event/3"});
  CHECK(r1->at(0).state() == v1::NOTIFICATION_STATE_PENDING);
  CHECK(store.PendingOfSubject("sub-b", "run/r1", 5)->size() == 1);
  CHECK(store.PendingOfSubject("sub-a", "run/none", 5)->empty());

  v1::Notification gone = first;
  gone.set_id(first.id() + 1000);
  CHECK(absl::IsNotFound(store.UpdateNotification(gone)));
}

CONFORMANCE_CASE("nothing pending: no next due, and retention keeps what is pending") {
  Stores s = FreshStores();
  auto& store = *s.notifications;
  CHECK(*store.NextDue() == absl::InfiniteFuture());
  REQUIRE(store.CreateSubscription(Subscription("sub-a", "alice", 1)).ok());
  REQUIRE(store
              .Enqueue("node-events", 0, 2,
                       {Note("sub-a", "node/n1", "event/1", 10),
                        Note("sub-a", "node/n2", "event/2", 11)})
              .ok());
  auto due = store.DueNotifications(T(20), 10);
  REQUIRE(due->size() == 2);
  v1::Notification gave_up = due->at(0);
  gave_up.set_state(v1::NOTIFICATION_STATE_GAVE_UP);
  REQUIRE(store.UpdateNotification(gave_up).ok());
  CHECK(*store.DeleteNotificationsBefore(T(100), 10) == 1);  // the pending one stays
  CHECK(store.ListNotifications({})->size() == 1);
  // A deleted subscription's notifications go with it.
  REQUIRE(store.DeleteSubscription("sub-a").ok());
  CHECK(store.ListNotifications({})->empty());
  CHECK(*store.NextDue() == absl::InfiniteFuture());
}

}  // namespace notifications_conformance
}  // namespace tessera::store::conformance
