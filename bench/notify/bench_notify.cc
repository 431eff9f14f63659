// Webhook delivery under a burst: 1,000 run events (100 runs resuming 10 times each) appended to
// PostgreSQL as fast as it takes them, the notifier (as tessera-server runs it) planning and
// posting them to a receiver on loopback, while a second subscription's receiver stalls every
// request past the post timeout. The receiver checks each delivery's signature, and counts every
// notification it gets twice or never.
//
// Prints the latency from each event to its receipt (p50, p99, max), against the target of
// 2 s at p99 and against the bound measured in the same run: one plain POST to the same receiver.
//
//   build/bench/bench_notify [--events 1000] [--runs 100] [--no-stall]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "services/notify/notifier.h"
#include "services/store/stores.h"
#include "tests/support/http_test_server.h"
#include "tests/support/postgres_server.h"

namespace tessera::notify {
namespace {

constexpr char kSecret[] = "bench-signing-secret-0123456789";

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

int Main(int argc, char** argv) {
  int events = 1000, runs = 100;
  bool no_stall = false;
  CLI::App app{"bench_notify: webhook delivery under a burst of run events"};
  app.add_option("--events", events, "run events appended in the burst")->capture_default_str();
  app.add_option("--runs", runs, "runs the events are spread over")->capture_default_str();
  app.add_flag("--no-stall", no_stall,
               "without the second subscription, whose receiver stalls every request");
  CLI11_PARSE(app, argc, argv);
  const bool stall = !no_stall;
  if (events < 1 || runs < 1) {  // event i is of run i % runs
    std::fprintf(stderr, "need --events >= 1 and --runs >= 1\n");
    return 2;
  }
  auto pg = testing::PostgresServer::Start();
  if (!pg.ok()) {
    std::fprintf(stderr, "PostgreSQL: %s\n", pg.status().ToString().c_str());
    return 1;
  }
  auto stores = store::OpenPostgresStores({.url = (*pg)->url(), .pool_size = 8});
  if (!stores.ok()) return 1;

  absl::Mutex mu;
  std::map<int64_t, double> latency;  // delivery id -> seconds from the event
  int repeats = 0, bad = 0;
  testing::HttpTestServer receiver([&](const testing::HttpTestRequest& r) {
    const absl::Time arrived = absl::Now();
    testing::HttpTestResponse answer;
    const auto header = [&](const std::string& name) {
      const auto it = r.headers.find(name);
      return it == r.headers.end() ? std::string() : it->second;
    };
    const auto body = nlohmann::json::parse(r.body, nullptr, false);
    int64_t id = 0;
    absl::Time at;
    std::string error;
    absl::MutexLock lock(&mu);
    if (r.target == "/ping") return answer;
    if (header("x-tessera-signature") !=
            WebhookSignature(kSecret, header("x-tessera-timestamp"), r.body) ||
        !absl::SimpleAtoi(header("x-tessera-delivery"), &id) || !body.is_object() ||
        !absl::ParseTime(absl::RFC3339_full, body.value("event_time", ""), &at, &error)) {
      ++bad;
      answer.status = 400;
      return answer;
    }
    if (!latency.emplace(id, absl::ToDoubleSeconds(arrived - at)).second) ++repeats;
    return answer;
  });
  const absl::Duration post_timeout = absl::Seconds(2);
  testing::HttpTestServer stalled([&](const testing::HttpTestRequest&) {
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(post_timeout + absl::Seconds(1)));
    return testing::HttpTestResponse{};
  });

  // The bound: plain POSTs to the same receiver, one at a time.
  auto poster = MakeCurlWebhookPoster();
  std::vector<double> posts;
  for (int i = 0; i < 50; ++i) {
    const absl::Time t = absl::Now();
    poster->Post({receiver.url() + "/ping", {}, "{}"}, post_timeout);
    posts.push_back(absl::ToDoubleSeconds(absl::Now() - t));
  }
  const double post_p50 = Percentile(posts, 0.5);

  auto clock = std::make_shared<SystemClock>();
  auto random = std::make_shared<SystemRandom>();
  const Sealer sealer{
      [](const std::string& p, const std::string&) -> absl::StatusOr<std::string> {
        return p;  // the bench's own secret, not a user's
      },
      [](const std::string& s, const std::string&) -> absl::StatusOr<std::string> { return s; }};
  NotificationHandler api(stores->notifications, stores->teams, sealer, clock, random);
  for (const std::string& url : {receiver.url(), stalled.url()}) {
    if (url == stalled.url() && !stall) continue;
    v1::CreateSubscriptionRequest req;
    req.mutable_subscription()->set_url(url + "/hook");
    req.mutable_subscription()->set_format(v1::WEBHOOK_FORMAT_GENERIC);
    req.mutable_subscription()->set_scope(v1::SUBSCRIPTION_SCOPE_USER);
    req.mutable_subscription()->add_events(v1::NOTIFICATION_EVENT_RUN_RESUMED);
    req.set_secret(kSecret);
    v1::CreateSubscriptionResponse created;
    if (auto st = api.CreateSubscription({"bench", v1::ROLE_USER}, req, &created); !st.ok()) {
      std::fprintf(stderr, "subscribe: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  NotifierOptions options;  // as tessera-server runs it
  options.delivery.timeout = post_timeout;
  Notifier notifier(*stores, poster, sealer, clock, random, options, [] { return true; });

  for (int r = 0; r < runs; ++r) {
    v1::Run run;
    run.set_id(absl::StrCat("id-", r));
    run.set_name(absl::StrCat("gpt-", r));
    run.set_user("bench");
    run.set_status(v1::RUN_STATUS_RUNNING);
    (void)stores->runs->CreateRun(run, {});
  }
  const absl::Time burst = absl::Now();
  for (int i = 0; i < events; ++i) {
    v1::RunEvent e;
    e.set_run_id(absl::StrCat("id-", i % runs));
    e.set_type(v1::RUN_EVENT_TYPE_STARTED);
    e.set_resumption_index(1 + i / runs);
    *e.mutable_time() = ToProtoTime(absl::Now());
    if (!stores->runs->AppendEvent(e).ok()) return 1;
  }
  const double burst_seconds = absl::ToDoubleSeconds(absl::Now() - burst);
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  for (;;) {
    {
      absl::MutexLock lock(&mu);
      if (static_cast<int>(latency.size()) >= events) break;
    }
    if (absl::Now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Where the time went: planning (event to notification) and delivery (to its last attempt).
  std::vector<double> planning, delivering;
  store::NotificationFilter all;
  all.limit = 4 * events;
  if (auto notes = stores->notifications->ListNotifications(all); notes.ok()) {
    for (const auto& n : *notes) {
      if (n.state() != v1::NOTIFICATION_STATE_DELIVERED) continue;
      planning.push_back(
          absl::ToDoubleSeconds(FromProtoTime(n.created_at()) - FromProtoTime(n.event_time())));
      delivering.push_back(
          absl::ToDoubleSeconds(FromProtoTime(n.delivered_at()) - FromProtoTime(n.created_at())));
    }
  }
  absl::MutexLock lock(&mu);
  std::printf(
      "planning (event to notification): p50 %.3f s, p99 %.3f s; delivery: p50 %.3f s, "
      "p99 %.3f s\n",
      Percentile(planning, 0.5), Percentile(planning, 0.99), Percentile(delivering, 0.5),
      Percentile(delivering, 0.99));
  std::vector<double> seconds;
  for (const auto& [id, s] : latency) seconds.push_back(s);
  const double p99 = Percentile(seconds, 0.99);
  std::printf("events %d appended in %.2f s (%.0f/s); receiver stalled alongside: %s\n", events,
              burst_seconds, events / burst_seconds, stall ? "yes" : "no");
  std::printf("delivered %zu of %d, lost %zu, twice %d, bad %d\n", latency.size(), events,
              events - std::min<size_t>(events, latency.size()), repeats, bad);
  std::printf("latency from event to receipt: p50 %.3f s, p99 %.3f s, max %.3f s\n",
              Percentile(seconds, 0.5), p99, Percentile(seconds, 1.0));
  std::printf("bound: one plain POST %.4f s (p50); p99 / 2 s target = %.2f (<= 1 passes)\n",
              post_p50, p99 / 2.0);
  return latency.size() == static_cast<size_t>(events) && repeats == 0 && bad == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera::notify

int main(int argc, char** argv) { return tessera::notify::Main(argc, argv); }
