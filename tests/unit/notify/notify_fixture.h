#pragma once
// What the notifier's unit tests share: people, predictable randomness, a reversible sealer,
// memory stores with a fake clock (subscribe, make runs and their events, read what was
// planned) and a receiver whose answers a test scripts.
#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "base/timestamps.h"
#include "services/notify/notification_deliverer.h"
#include "services/notify/notification_handler.h"
#include "services/notify/notification_planner.h"

namespace tessera::notify::notify_test {

inline const auth::Principal kAlice{"alice", v1::ROLE_USER};
inline const auth::Principal kBob{"bob", v1::ROLE_USER};
inline const auth::Principal kOps{"ops", v1::ROLE_OPERATOR};
inline const auth::Principal kAdmin{"root", v1::ROLE_ADMIN};

// Next() is fixed: ids are predictable and the jitter factor is exactly 1.
class HalfRandom final : public Random {
 public:
  uint64_t Next() override { return (uint64_t{1} << 63) + counter_++ * 7919; }

 private:
  std::atomic<uint64_t> counter_{0};
};

inline Sealer Reversing() {
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

  void AddTeam(const std::string& name) {
    v1::Team t;
    t.set_name(name);
    REQUIRE(stores.teams->CreateTeam(t).ok());
  }
  // A deliverer over this fixture's store, clock and randomness; subscriptions without a secret
  // unless `open_secret` says otherwise.
  std::unique_ptr<NotificationDeliverer> Deliverer(
      std::shared_ptr<WebhookPoster> poster, DeliveryOptions options,
      SecretOpener open_secret = [](const auto&) { return std::string(); }) {
    return std::make_unique<NotificationDeliverer>(stores.notifications, std::move(poster),
                                                   std::move(open_secret), clock, random, options);
  }

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
  void Event(const std::string& run, v1::RunEventType type, int resumption = 0,
             const std::string& message = "") {
    v1::RunEvent e;
    e.set_run_id("id-" + run);
    e.set_type(type);
    e.set_resumption_index(resumption);
    e.set_message(message);
    *e.mutable_time() = ToProtoTime(clock->Now());
    REQUIRE(stores.runs->AppendEvent(e).ok());
  }
  std::vector<v1::Notification> All() {
    auto all = stores.notifications->ListNotifications({});
    REQUIRE(all.ok());
    return {all->rbegin(), all->rend()};  // oldest first
  }
};

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

inline std::string DeliveryId(const WebhookRequest& r) {
  for (const auto& [name, value] : r.headers) {
    if (name == "X-Tessera-Delivery") return value;
  }
  return "";
}

inline std::vector<std::string> ScriptedPoster::SentFor(const std::string& run) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& r : sent) {
    if (absl::StrContains(r.body, run + " ")) ids.push_back(DeliveryId(r));
  }
  return ids;
}

}  // namespace tessera::notify::notify_test
