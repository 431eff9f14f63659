// NotificationDeliverer against memory stores, a fake clock and scripted receivers: order per
// subject, retries with backoff, refusals, slow receivers, giving up, signatures.
#include "tests/unit/notify/notify_fixture.h"

namespace tessera::notify {
namespace deliverer_test {
using namespace notify_test;  // NOLINT: the fixture is these tests' vocabulary

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
  auto deliverer = f.Deliverer(poster, options);
  // gpt-a's first fails (HTTP 503, then no answer); gpt-b's goes through.
  poster->answers["gpt-a"] = {{503, ""}};
  CHECK(*deliverer->DeliverDue() == 2);  // each run's head; gpt-a's failure waits behind its first
  deliverer->AwaitIdle();
  auto all = f.All();
  CHECK(all[0].state() == v1::NOTIFICATION_STATE_PENDING);
  CHECK(all[0].attempts() == 1);
  CHECK(all[0].last_error() == "HTTP 503");
  CHECK(FromProtoTime(all[0].next_attempt_at()) == f.clock->Now() + absl::Seconds(2));
  CHECK(all[1].state() == v1::NOTIFICATION_STATE_DELIVERED);
  CHECK(all[2].state() == v1::NOTIFICATION_STATE_PENDING);
  CHECK(all[2].attempts() == 0);
  CHECK(*deliverer->DeliverDue() == 0);  // not due yet
  CHECK(deliverer->DueIn() == absl::Seconds(2));
  f.clock->Advance(absl::Seconds(2));
  poster->answers["gpt-a"] = {{0, "connection refused"}};
  CHECK(*deliverer->DeliverDue() == 1);
  deliverer->AwaitIdle();
  all = f.All();
  CHECK(all[0].attempts() == 2);
  CHECK(all[0].last_error() == "connection refused");
  CHECK(deliverer->DueIn() == absl::Seconds(4));  // doubled
  f.clock->Advance(absl::Seconds(4));
  // Recovered; then the failure notice is refused.
  poster->answers["gpt-a"] = {{204, ""}, {410, ""}};
  CHECK(*deliverer->DeliverDue() == 1);
  deliverer->AwaitIdle();
  // gpt-a's next went right after it, on the same thread (only then: it waited for it).
  CHECK(*deliverer->DeliverDue() == 0);
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
  CHECK(deliverer->DueIn() == absl::InfiniteDuration());
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
  auto deliverer = f.Deliverer(poster, options);
  // How many posts a pass starts; none ends before the pass has started them all.
  const auto pass = [&] {
    {
      absl::MutexLock lock(&poster->mu);
      poster->open = false;
    }
    const int started = *deliverer->DeliverDue();
    {
      absl::MutexLock lock(&poster->mu);
      poster->open = true;
    }
    deliverer->AwaitIdle();
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
  auto deliverer = f.Deliverer(poster, options);
  for (int i = 0; i < 20 && f.All()[0].state() == v1::NOTIFICATION_STATE_PENDING; ++i) {
    poster->answers["gpt-a"] = {{500, ""}};
    (void)deliverer->DeliverDue();
    deliverer->AwaitIdle();
    if (deliverer->DueIn() != absl::InfiniteDuration()) f.clock->Advance(deliverer->DueIn());
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
  auto deliverer = f.Deliverer(poster, DeliveryOptions{}, [&](const store::SubscriptionRecord& r) {
    return sealer.open(r.sealed_secret, r.subscription.id());
  });
  REQUIRE(*deliverer->DeliverDue() == 1);
  deliverer->AwaitIdle();
  REQUIRE(poster->sent.size() == 1);
  const auto& sent = poster->sent[0];
  std::map<std::string, std::string> h(sent.headers.begin(), sent.headers.end());
  CHECK(h.at("X-Tessera-Signature") ==
        WebhookSignature("sixteen-bytes-ok", h.at("X-Tessera-Timestamp"), sent.body));
}

}  // namespace deliverer_test
}  // namespace tessera::notify
