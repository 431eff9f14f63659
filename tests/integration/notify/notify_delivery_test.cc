// The notifier for real: PostgreSQL stores, libcurl posting to an HTTP receiver on loopback that
// fails, stalls and then recovers, the real clock. The receiver checks what users rely on: each
// notification accepted once (by its X-Tessera-Delivery id), a run's in the order they happened,
// every body signed with the subscription's secret, none lost.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "services/notify/notifier.h"
#include "services/runs/secret_box.h"
#include "services/store/stores.h"
#include "tests/support/http_test_server.h"
#include "tests/support/postgres_server.h"

namespace tessera::notify {
namespace notify_delivery_test {

constexpr char kSecret[] = "a-signing-secret-of-32-bytes-...";

// Seals with a real SecretBox (the server's --secrets-key-file).
Sealer BoxSealer() {
  std::array<unsigned char, runs::SecretBox::kKeyBytes> key{};
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<unsigned char>(i * 7 + 1);
  const runs::SecretBox box(key);
  return {[box](const std::string& p, const std::string& id) { return box.Seal(p, id); },
          [box](const std::string& s, const std::string& id) { return box.Open(s, id); }};
}

testing::HttpTestResponse Answer(int status) {
  testing::HttpTestResponse r;
  r.status = status;
  return r;
}

std::string Header(const testing::HttpTestRequest& r, const std::string& name) {
  const auto it = r.headers.find(name);
  return it == r.headers.end() ? "" : it->second;
}

// What the receiver accepted, and what it refused to count.
struct Receipts {
  absl::Mutex mu;
  std::map<int64_t, std::string> accepted ABSL_GUARDED_BY(mu);  // delivery id -> text
  std::map<std::string, std::vector<int>> attempts_by_run
      ABSL_GUARDED_BY(mu);  // accepted, in order
  int repeats ABSL_GUARDED_BY(mu) = 0;
  int bad_signatures ABSL_GUARDED_BY(mu) = 0;
  std::atomic<int> failed{0}, stalled{0};
};

TEST_CASE(
    "a burst of run events reaches a failing, stalling, recovering receiver: each once, in "
    "order") {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  auto stores = store::OpenPostgresStores({.url = pg.url(), .pool_size = 8});
  REQUIRE(stores.ok());
  auto clock = std::make_shared<SystemClock>();
  auto random = std::make_shared<SystemRandom>();

  // The receiver: for its first second it answers 500 or stalls past the sender's timeout (then
  // 503, which the sender no longer hears); after that it accepts everything.
  Receipts receipts;
  const absl::Time start = absl::Now();
  const absl::Duration post_timeout = absl::Milliseconds(400);
  std::atomic<int> requests{0};
  testing::HttpTestServer receiver([&](const testing::HttpTestRequest& r) {
    const int n = requests++;
    if (absl::Now() - start < absl::Seconds(1)) {
      if (n % 3 == 2) {
        ++receipts.stalled;
        std::this_thread::sleep_for(absl::ToChronoMilliseconds(2 * post_timeout));
        return Answer(503);
      }
      ++receipts.failed;
      return Answer(500);
    }
    absl::MutexLock lock(&receipts.mu);
    if (Header(r, "x-tessera-signature") !=
        WebhookSignature(kSecret, Header(r, "x-tessera-timestamp"), r.body)) {
      ++receipts.bad_signatures;
      return Answer(401);
    }
    int64_t id = 0;
    if (!absl::SimpleAtoi(Header(r, "x-tessera-delivery"), &id)) return Answer(400);
    const auto body = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("text") || !body.contains("subject")) {
      return Answer(400);
    }
    if (!receipts.accepted.emplace(id, body.at("text").get<std::string>()).second) {
      ++receipts.repeats;
    } else {
      // "Run gpt-7 resumed: attempt 3 started"
      const std::string text = body.at("text");
      const std::string run = body.at("subject");
      const auto at = text.find("attempt ");
      receipts.attempts_by_run[run].push_back(std::stoi(text.substr(at + 8)));
    }
    return Answer(200);
  });

  const Sealer sealer = BoxSealer();
  NotificationHandler api(stores->notifications, stores->teams, sealer, clock, random);
  v1::CreateSubscriptionRequest req;
  req.mutable_subscription()->set_url(receiver.url() + "/hooks/tessera");
  req.mutable_subscription()->set_format(v1::WEBHOOK_FORMAT_GENERIC);
  req.mutable_subscription()->set_scope(v1::SUBSCRIPTION_SCOPE_USER);
  req.mutable_subscription()->add_events(v1::NOTIFICATION_EVENT_RUN_RESUMED);
  req.set_secret(kSecret);
  v1::CreateSubscriptionResponse created;
  REQUIRE(api.CreateSubscription({"alice", v1::ROLE_USER}, req, &created).ok());

  NotifierOptions options;
  options.plan_interval = absl::Milliseconds(100);
  options.deliver_interval = absl::Milliseconds(100);
  options.delivery.timeout = post_timeout;
  options.delivery.first_retry = absl::Milliseconds(200);
  options.delivery.max_retry = absl::Seconds(1);
  Notifier notifier(*stores, MakeCurlWebhookPoster(), sealer, clock, random, options,
                    [] { return true; });

  // 20 runs resume 5 times each, interleaved, as fast as the store takes them.
  constexpr int kRuns = 20, kResumptions = 5;
  for (int r = 0; r < kRuns; ++r) {
    v1::Run run;
    run.set_id(absl::StrCat("id-", r));
    run.set_name(absl::StrCat("gpt-", r));
    run.set_user("alice");
    run.set_status(v1::RUN_STATUS_RUNNING);
    *run.mutable_created_at() = ToProtoTime(absl::Now());
    REQUIRE(stores->runs->CreateRun(run, {}).ok());
  }
  for (int attempt = 1; attempt <= kResumptions; ++attempt) {
    for (int r = 0; r < kRuns; ++r) {
      v1::RunEvent e;
      e.set_run_id(absl::StrCat("id-", r));
      e.set_type(v1::RUN_EVENT_TYPE_STARTED);
      e.set_resumption_index(attempt);
      *e.mutable_time() = ToProtoTime(absl::Now());
      REQUIRE(stores->runs->AppendEvent(e).ok());
    }
  }
  // The bound comes from the configuration: the receiver's second of trouble, then at most
  // kResumptions deliveries in a row per run, each after at most the longest retry wait and a
  // post's timeout, all doubled for a loaded machine.
  const absl::Duration bound =
      2 * (absl::Seconds(1) + kResumptions * (options.delivery.max_retry + post_timeout));
  const absl::Time deadline = absl::Now() + bound;
  for (;;) {
    {
      absl::MutexLock lock(&receipts.mu);
      if (static_cast<int>(receipts.accepted.size()) >= kRuns * kResumptions) break;
    }
    if (absl::Now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The notifier records a delivery once the receiver's answer is back, so the record may trail
  // the last receipt by a moment (CI once listed 2 of 100 still pending right after it).
  v1::ListNotificationsRequest list;
  list.set_limit(1000);
  v1::ListNotificationsResponse listed;
  for (;;) {
    listed.Clear();
    REQUIRE(api.ListNotifications({"alice", v1::ROLE_USER}, list, &listed).ok());
    const bool all_delivered = std::all_of(
        listed.notifications().begin(), listed.notifications().end(),
        [](const v1::Notification& n) { return n.state() == v1::NOTIFICATION_STATE_DELIVERED; });
    if ((all_delivered && listed.notifications_size() == kRuns * kResumptions) ||
        absl::Now() > deadline) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  absl::MutexLock lock(&receipts.mu);
  INFO("failed " << receipts.failed.load() << ", stalled " << receipts.stalled.load());
  CHECK(receipts.accepted.size() == kRuns * kResumptions);  // none lost
  CHECK(receipts.repeats == 0);                             // none accepted twice
  CHECK(receipts.bad_signatures == 0);
  CHECK(receipts.failed > 0);  // the trouble happened
  CHECK(receipts.stalled > 0);
  REQUIRE(receipts.attempts_by_run.size() == kRuns);
  for (const auto& [run, attempts] : receipts.attempts_by_run) {
    INFO(run);
    CHECK(attempts == std::vector<int>{2, 3, 4, 5, 6});  // in order (attempt = resumption + 1)
  }
  // The record says the same: every one delivered, some after retries.
  REQUIRE(listed.notifications_size() == kRuns * kResumptions);
  int retried = 0;
  for (const auto& n : listed.notifications()) {
    CHECK(n.state() == v1::NOTIFICATION_STATE_DELIVERED);
    if (n.attempts() > 1) ++retried;
  }
  CHECK(retried > 0);
}

}  // namespace notify_delivery_test
}  // namespace tessera::notify
