// The notifier's roles against memory stores and a fake clock: the planner (which events become
// which notifications, once, for whom; gaps in event ids), the deliverer (order per subject,
// retries with backoff, refusals, no post twice) and the API's checks.
#include <catch2/catch.hpp>
#include <deque>
#include <map>

#include "absl/strings/match.h"
#include "base/timestamps.h"
#include "services/notify/notification_deliverer.h"
#include "services/notify/notification_handler.h"
#include "services/notify/notification_planner.h"

namespace tessera::notify {
namespace {

const auth::Principal kAlice{"alice", v1::ROLE_USER};
const auth::Principal kBob{"bob", v1::ROLE_USER};
const auth::Principal kOps{"ops", v1::ROLE_OPERATOR};
const auth::Principal kAdmin{"root", v1::ROLE_ADMIN};

// Next() is fixed: ids are predictable and the jitter factor is exactly 1.
class HalfRandom final : public Random {
 public:
  uint64_t Next() override { return (uint64_t{1} << 63) + counter_++ * 7919; }

 private:
  std::atomic<uint64_t> counter_{0};
};

Sealer Reversing() {
  return {[](const std::string& p, const std::string& id) -> absl::StatusOr<std::string> {
            return id + ":" + std::string(p.rbegin(), p.rend());
          },
          [](const std::string& s, const std::string& id) -> absl::StatusOr<std::string> {
            if (!absl::StartsWith(s, id + ":")) return absl::DataLossError("not this one's");
            const std::string body = s.substr(id.size() + 1);
            return std::string(body.rbegin(), body.rend());
          }};
}

struct Fixture {
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<HalfRandom> random = std::make_shared<HalfRandom>();
  NotificationHandler handler{stores.notifications, stores.teams, Reversing(), clock, random};
  NotificationPlanner planner{stores, clock, PlannerOptions{}};

  std::string Subscribe(const auth::Principal& who, v1::SubscriptionScope scope,
                        std::vector<v1::NotificationEvent> events, const std::string& team = "",
                        double queue_bound = 0) {
    v1::CreateSubscriptionRequest req;
    auto* s = req.mutable_subscription();
    s->set_url("http://127.0.0.1:9/" + who.user);
    s->set_format(v1::WEBHOOK_FORMAT_SLACK);
    s->set_scope(scope);
    s->set_team(team);
    s->set_queue_bound_seconds(queue_bound);
    for (auto e : events) s->add_events(e);
    v1::CreateSubscriptionResponse resp;
    const absl::Status st = handler.CreateSubscription(who, req, &resp);
    INFO(st.ToString());
    REQUIRE(st.ok());
    return resp.subscription().id();
  }
  v1::Run Run(const std::string& name, const std::string& user, const std::string& team = "") {
    v1::Run run;
    run.set_id("id-" + name);
    run.set_name(name);
    run.set_user(user);
    run.set_team(team);
    run.set_status(v1::RUN_STATUS_QUEUED);
    run.set_resumption_index(0);
    *run.mutable_created_at() = ToProtoTime(clock->Now());
    *run.mutable_updated_at() = ToProtoTime(clock->Now());
    v1::RunEvent queued;
    queued.set_type(v1::RUN_EVENT_TYPE_QUEUED);
    *queued.mutable_time() = ToProtoTime(clock->Now());
    auto created = stores.runs->CreateRun(run, {queued});
    REQUIRE(created.ok());
    return *created;
  }
  void Event(const std::string& run, v1::RunEventType type, int resumption = 0) {
    v1::RunEvent e;
    e.set_run_id("id-" + run);
    e.set_type(type);
    e.set_resumption_index(resumption);
    *e.mutable_time() = ToProtoTime(clock->Now());
    REQUIRE(stores.runs->AppendEvent(e).ok());
  }
  std::vector<v1::Notification> All() {
    auto all = stores.notifications->ListNotifications({});
    REQUIRE(all.ok());
    return {all->rbegin(), all->rend()};  // oldest first
  }
};

TEST_CASE("run events become notifications for the owner's and the team's subscriptions") {
  Fixture f;
  REQUIRE(f.stores.teams
              ->CreateTeam([] {
                v1::Team t;
                t.set_name("nlp");
                return t;
              }())
              .ok());
  REQUIRE(f.stores.teams->AddMember("nlp", "bob").ok());
  const std::string alice =
      f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER,
                  {v1::NOTIFICATION_EVENT_RUN_FAILED, v1::NOTIFICATION_EVENT_RUN_RESUMED});
  const std::string team =
      f.Subscribe(kBob, v1::SUBSCRIPTION_SCOPE_TEAM, {v1::NOTIFICATION_EVENT_RUN_COMPLETED}, "nlp");
  f.Run("gpt-a", "alice", "nlp");
  f.Run("gpt-c", "carol");
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_STARTED);     // a first start: not a resumption
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_STARTED, 1);  // resumed
  f.Event("gpt-c", v1::RUN_EVENT_TYPE_FAILED);      // carol's: nobody's subscription
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_COMPLETED);   // the team's
  CHECK(*f.planner.PlanRunEvents() == 2);
  CHECK(*f.planner.PlanRunEvents() == 0);  // planned once
  const auto all = f.All();
  REQUIRE(all.size() == 2);
  CHECK(all[0].subscription_id() == alice);
  CHECK(all[0].owner() == "alice");
  CHECK(all[0].event() == v1::NOTIFICATION_EVENT_RUN_RESUMED);
  CHECK(all[0].subject() == "run/gpt-a");
  CHECK(all[0].text() == "Run gpt-a resumed: attempt 2 started");
  CHECK(all[1].subscription_id() == team);
  CHECK(all[1].text() == "Run gpt-a completed");
  // A new planner (a restart, another instance) starts from the stored cursor: nothing again.
  NotificationPlanner again(f.stores, f.clock, PlannerOptions{});
  CHECK(*again.PlanRunEvents() == 0);
}

TEST_CASE("node events go to the operators' subscriptions only") {
  Fixture f;
  const std::string ops =
      f.Subscribe(kOps, v1::SUBSCRIPTION_SCOPE_OPERATORS,
                  {v1::NOTIFICATION_EVENT_NODE_CORDONED, v1::NOTIFICATION_EVENT_NODE_RETURNED});
  f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER, {v1::NOTIFICATION_EVENT_RUN_FAILED});
  for (auto type : {v1::NODE_EVENT_TYPE_CORDONED, v1::NODE_EVENT_TYPE_DRAINING,
                    v1::NODE_EVENT_TYPE_UNCORDONED}) {
    v1::NodeEvent e;
    e.set_node_name("node-7");
    e.set_type(type);
    e.set_reason(type == v1::NODE_EVENT_TYPE_CORDONED ? "health: XID 79" : "");
    REQUIRE(f.stores.node_events->AppendNodeEvent(e).ok());
  }
  CHECK(*f.planner.PlanNodeEvents() == 2);
  const auto all = f.All();
  REQUIRE(all.size() == 2);
  CHECK(all[0].subscription_id() == ops);
  CHECK(all[0].text() == "Node node-7 cordoned: health: XID 79");
  CHECK(all[1].text() == "Node node-7 returned to service");
  CHECK(all[1].subject() == "node/node-7");
}

TEST_CASE("a run waiting in the queue past a subscription's bound is told once per attempt") {
  Fixture f;
  f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER, {v1::NOTIFICATION_EVENT_RUN_QUEUED_TOO_LONG}, "",
              600);
  f.Run("gpt-q", "alice");
  f.clock->Advance(absl::Seconds(599));
  CHECK(*f.planner.PlanQueueWaits() == 0);
  f.clock->Advance(absl::Seconds(2));
  CHECK(*f.planner.PlanQueueWaits() == 1);
  f.clock->Advance(absl::Seconds(60));
  CHECK(*f.planner.PlanQueueWaits() == 0);  // the same attempt: once
  const auto all = f.All();
  REQUIRE(all.size() == 1);
  CHECK(all[0].text() == "Run gpt-q has waited in the queue for 10m1s (over 10m)");
}

TEST_CASE("an event id that shows up late is planned, one that never does is waited for a while") {
  EventCursor cursor;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int64_t stored = 0;
  // 3 is missing (its transaction has not committed): 4 and 5 are planned, the cursor stays at 2.
  CHECK(cursor.Take(0, {1, 2, 4, 5}, t0, absl::Seconds(30), &stored) ==
        std::vector<int64_t>{1, 2, 4, 5});
  CHECK(stored == 2);
  // 3 commits: planned, and the cursor moves past everything.
  CHECK(cursor.Take(2, {3, 4, 5, 6}, t0 + absl::Seconds(1), absl::Seconds(30), &stored) ==
        std::vector<int64_t>{3, 6});
  CHECK(stored == 6);
  // 7 never comes (rolled back): after the grace the cursor moves on.
  CHECK(cursor.Take(6, {8}, t0 + absl::Seconds(2), absl::Seconds(30), &stored) ==
        std::vector<int64_t>{8});
  CHECK(stored == 6);
  CHECK(cursor.Take(6, {8}, t0 + absl::Seconds(20), absl::Seconds(30), &stored).empty());
  CHECK(stored == 6);
  CHECK(cursor.Take(6, {8}, t0 + absl::Seconds(33), absl::Seconds(30), &stored).empty());
  CHECK(stored == 8);
}

// A receiver whose answers the test scripts per run (the first run name its body holds; posts
// run on the deliverer's threads, in any order across runs), 200 when none is scripted; records
// what it was sent.
class ScriptedPoster final : public WebhookPoster {
 public:
  WebhookResponse Post(const WebhookRequest& request, absl::Duration) override {
    absl::MutexLock lock(&mu_);
    sent.push_back(request);
    for (auto& [run, queue] : answers) {
      if (!absl::StrContains(request.body, run + " ") || queue.empty()) continue;
      WebhookResponse r = queue.front();
      queue.pop_front();
      return r;
    }
    return {200, ""};
  }
  // The delivery ids sent for `run`, in order.
  std::vector<std::string> SentFor(const std::string& run);

  absl::Mutex mu_;
  std::vector<WebhookRequest> sent;
  std::map<std::string, std::deque<WebhookResponse>> answers;  // by run name
};

std::string DeliveryId(const WebhookRequest& r) {
  for (const auto& [name, value] : r.headers) {
    if (name == "X-Tessera-Delivery") return value;
  }
  return "";
}

std::vector<std::string> ScriptedPoster::SentFor(const std::string& run) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& r : sent) {
    if (absl::StrContains(r.body, run + " ")) ids.push_back(DeliveryId(r));
  }
  return ids;
}

TEST_CASE("deliveries keep each run's order, retry with backoff, and give up on a refusal") {
  Fixture f;
  f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER,
              {v1::NOTIFICATION_EVENT_RUN_RESUMED, v1::NOTIFICATION_EVENT_RUN_FAILED});
  f.Run("gpt-a", "alice");
  f.Run("gpt-b", "alice");
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_STARTED, 1);
  f.Event("gpt-b", v1::RUN_EVENT_TYPE_STARTED, 1);
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_FAILED);
  REQUIRE(*f.planner.PlanRunEvents() == 3);
  auto poster = std::make_shared<ScriptedPoster>();
  DeliveryOptions options;
  options.first_retry = absl::Seconds(2);
  NotificationDeliverer deliverer(
      f.stores.notifications, poster, [](const auto&) { return std::string(); }, f.clock, f.random,
      options);
  // gpt-a's first fails (HTTP 503, then no answer); gpt-b's goes through.
  poster->answers["gpt-a"] = {{503, ""}};
  CHECK(*deliverer.DeliverDue() == 2);  // each run's head; gpt-a's failure waits behind its first
  deliverer.AwaitIdle();
  auto all = f.All();
  CHECK(all[0].state() == v1::NOTIFICATION_STATE_PENDING);
  CHECK(all[0].attempts() == 1);
  CHECK(all[0].last_error() == "HTTP 503");
  CHECK(FromProtoTime(all[0].next_attempt_at()) == f.clock->Now() + absl::Seconds(2));
  CHECK(all[1].state() == v1::NOTIFICATION_STATE_DELIVERED);
  CHECK(all[2].state() == v1::NOTIFICATION_STATE_PENDING);
  CHECK(all[2].attempts() == 0);
  CHECK(*deliverer.DeliverDue() == 0);  // not due yet
  CHECK(deliverer.DueIn() == absl::Seconds(2));
  f.clock->Advance(absl::Seconds(2));
  poster->answers["gpt-a"] = {{0, "connection refused"}};
  CHECK(*deliverer.DeliverDue() == 1);
  deliverer.AwaitIdle();
  all = f.All();
  CHECK(all[0].attempts() == 2);
  CHECK(all[0].last_error() == "connection refused");
  CHECK(deliverer.DueIn() == absl::Seconds(4));  // doubled
  f.clock->Advance(absl::Seconds(4));
  // Recovered; then the failure notice is refused.
  poster->answers["gpt-a"] = {{204, ""}, {410, ""}};
  CHECK(*deliverer.DeliverDue() == 1);
  deliverer.AwaitIdle();
  // gpt-a's next went right after it, on the same thread (only then: it waited for it).
  CHECK(*deliverer.DeliverDue() == 0);
  all = f.All();
  CHECK(all[0].state() == v1::NOTIFICATION_STATE_DELIVERED);
  CHECK(all[0].attempts() == 3);
  CHECK(all[0].last_error().empty());
  CHECK(all[2].state() == v1::NOTIFICATION_STATE_GAVE_UP);
  CHECK(all[2].last_error() == "HTTP 410");
  // What the receiver saw: gpt-a's in order, each retry under the same delivery id.
  const std::string a1 = std::to_string(all[0].id()), b1 = std::to_string(all[1].id()),
                    a2 = std::to_string(all[2].id());
  CHECK(poster->SentFor("gpt-a") == std::vector<std::string>{a1, a1, a1, a2});
  CHECK(poster->SentFor("gpt-b") == std::vector<std::string>{b1});
  CHECK(deliverer.DueIn() == absl::InfiniteDuration());
}

// Each post waits until the gate is open, takes `took` of the fake clock (a slow receiver), then
// answers 500.
class SlowPoster final : public WebhookPoster {
 public:
  explicit SlowPoster(std::shared_ptr<FakeClock> clock) : clock_(std::move(clock)) {}
  WebhookResponse Post(const WebhookRequest&, absl::Duration) override {
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&open));
    }
    clock_->Advance(took);
    return {500, ""};
  }
  std::shared_ptr<FakeClock> clock_;
  absl::Mutex mu;
  bool open ABSL_GUARDED_BY(mu) = true;
  absl::Duration took = absl::Seconds(3);
};

TEST_CASE("a slow receiver gets one post at a time until it answers quickly again") {
  Fixture f;
  f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER, {v1::NOTIFICATION_EVENT_RUN_FAILED});
  for (const std::string run : {"gpt-a", "gpt-b", "gpt-c", "gpt-d"}) {
    f.Run(run, "alice");
    f.Event(run, v1::RUN_EVENT_TYPE_FAILED);
  }
  REQUIRE(*f.planner.PlanRunEvents() == 4);
  auto poster = std::make_shared<SlowPoster>(f.clock);
  DeliveryOptions options;
  options.first_retry = absl::Seconds(1);
  NotificationDeliverer deliverer(
      f.stores.notifications, poster, [](const auto&) { return std::string(); }, f.clock, f.random,
      options);
  // How many posts a pass starts; none ends before the pass has started them all.
  const auto pass = [&] {
    {
      absl::MutexLock lock(&poster->mu);
      poster->open = false;
    }
    const int started = *deliverer.DeliverDue();
    {
      absl::MutexLock lock(&poster->mu);
      poster->open = true;
    }
    deliverer.AwaitIdle();
    return started;
  };
  CHECK(pass() == 4);                     // not known to be slow yet: every run's head
  f.clock->Advance(absl::Minutes(1));     // every retry due
  CHECK(pass() == 1);                     // slow: one at a time
  poster->took = absl::Milliseconds(10);  // fast again
  CHECK(pass() == 1);                     // the next one, still alone
  CHECK(pass() == 2);                     // it answered quickly: the two not tried since, together
}

TEST_CASE("an undelivered notification is given up once older than the bound") {
  Fixture f;
  f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER, {v1::NOTIFICATION_EVENT_RUN_FAILED});
  f.Run("gpt-a", "alice");
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_FAILED);
  REQUIRE(*f.planner.PlanRunEvents() == 1);
  auto poster = std::make_shared<ScriptedPoster>();
  DeliveryOptions options;
  options.give_up_after = absl::Minutes(10);
  NotificationDeliverer deliverer(
      f.stores.notifications, poster, [](const auto&) { return std::string(); }, f.clock, f.random,
      options);
  for (int i = 0; i < 20 && f.All()[0].state() == v1::NOTIFICATION_STATE_PENDING; ++i) {
    poster->answers["gpt-a"] = {{500, ""}};
    (void)deliverer.DeliverDue();
    deliverer.AwaitIdle();
    if (deliverer.DueIn() != absl::InfiniteDuration()) f.clock->Advance(deliverer.DueIn());
  }
  const auto n = f.All()[0];
  CHECK(n.state() == v1::NOTIFICATION_STATE_GAVE_UP);
  CHECK(absl::StrContains(n.last_error(), "HTTP 500; given up after"));
  // Attempts at 0, 1, 3, 7, ... 511 s (waits of 1, 2, 4, ... s); the eleventh, at 1,023 s, is
  // past the 10 minutes.
  CHECK(n.attempts() == 11);
}

TEST_CASE("a signed subscription's secret is sealed in the store and signs each delivery") {
  Fixture f;
  v1::CreateSubscriptionRequest req;
  auto* s = req.mutable_subscription();
  s->set_url("https://hooks.example.com/x");
  s->set_format(v1::WEBHOOK_FORMAT_GENERIC);
  s->set_scope(v1::SUBSCRIPTION_SCOPE_USER);
  s->add_events(v1::NOTIFICATION_EVENT_RUN_FAILED);
  req.set_secret("sixteen-bytes-ok");
  v1::CreateSubscriptionResponse resp;
  REQUIRE(f.handler.CreateSubscription(kAlice, req, &resp).ok());
  CHECK(resp.subscription().signed_deliveries());
  const auto stored = f.stores.notifications->ListSubscriptions()->at(0);
  CHECK(stored.sealed_secret != "sixteen-bytes-ok");
  CHECK_FALSE(absl::StrContains(stored.sealed_secret, "sixteen-bytes-ok"));
  f.Run("gpt-a", "alice");
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_FAILED);
  REQUIRE(*f.planner.PlanRunEvents() == 1);
  auto poster = std::make_shared<ScriptedPoster>();
  const Sealer sealer = Reversing();
  NotificationDeliverer deliverer(
      f.stores.notifications, poster,
      [&](const store::SubscriptionRecord& r) {
        return sealer.open(r.sealed_secret, r.subscription.id());
      },
      f.clock, f.random, DeliveryOptions{});
  REQUIRE(*deliverer.DeliverDue() == 1);
  deliverer.AwaitIdle();
  REQUIRE(poster->sent.size() == 1);
  const auto& sent = poster->sent[0];
  std::map<std::string, std::string> h(sent.headers.begin(), sent.headers.end());
  CHECK(h.at("X-Tessera-Signature") ==
        WebhookSignature("sixteen-bytes-ok", h.at("X-Tessera-Timestamp"), sent.body));
}

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
  REQUIRE(f.stores.teams
              ->CreateTeam([] {
                v1::Team t;
                t.set_name("nlp");
                return t;
              }())
              .ok());
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

}  // namespace
}  // namespace tessera::notify
