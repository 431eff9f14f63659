#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "transport/metrics/registry.h"
#include "transport/metrics/text_format.h"

namespace tessera::metrics {
namespace metrics_registry_test {

TEST_CASE("metrics: invalid metric names are errors", "[metrics]") {
  Registry r;
  for (const char* name : {"", "1abc", "a-b", "a b", "é", "a.b"}) {
    auto f = r.AddCounter(name, "help");
    INFO(name);
    REQUIRE_FALSE(f.ok());
    CHECK(f.status().code() == absl::StatusCode::kInvalidArgument);
  }
  CHECK(r.AddCounter("a:b_c1", "help").ok());
  CHECK(r.AddGauge("_x", "help").ok());
  CHECK(r.AddGauge("::", "help").ok());
  CHECK(r.Collect().size() == 3);
}

TEST_CASE("metrics: invalid label names are errors", "[metrics]") {
  Registry r;
  for (const std::vector<std::string>& labels : std::vector<std::vector<std::string>>{
           {"1a"}, {"a:b"}, {""}, {"__reserved"}, {"a", "a"}, {"ok", "bad-name"}}) {
    auto f = r.AddCounter("c", "help", labels);
    REQUIRE_FALSE(f.ok());
    CHECK(f.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(f.status().message()), Catch::Contains("label"));
  }
  // "le" belongs to histogram buckets but is an ordinary label elsewhere.
  CHECK_FALSE(r.AddHistogram("h", "help", {"le"}, {1}).ok());
  CHECK(r.AddCounter("c", "help", {"le", "_a1"}).ok());
}

TEST_CASE("metrics: histogram buckets must be finite and strictly increasing", "[metrics]") {
  Registry r;
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const std::vector<double>& bounds :
       std::vector<std::vector<double>>{{1, 1}, {2, 1}, {nan}, {-inf, 1}, {1, inf, 2}}) {
    auto h = r.AddHistogram("h", "help", {}, bounds);
    REQUIRE_FALSE(h.ok());
    CHECK(h.status().code() == absl::StatusCode::kInvalidArgument);
  }
  auto h = r.AddHistogram("h", "help", {}, {0.5, 1, inf});  // a trailing +Inf is implicit anyway
  REQUIRE(h.ok());
  CHECK((*h)->bucket_bounds() == std::vector<double>{0.5, 1});
  CHECK(r.AddHistogram("h_empty", "help", {}, {}).ok());  // only +Inf
}

TEST_CASE("metrics: re-registration returns the family or a conflict", "[metrics]") {
  Registry r;
  auto a = r.AddCounter("requests_total", "Requests.", {"method"});
  REQUIRE(a.ok());
  auto again = r.AddCounter("requests_total", "Requests.", {"method"});
  REQUIRE(again.ok());
  CHECK(*again == *a);

  CHECK(r.AddGauge("requests_total", "Requests.", {"method"}).status().code() ==
        absl::StatusCode::kAlreadyExists);
  CHECK(r.AddCounter("requests_total", "Requests.", {"path"}).status().code() ==
        absl::StatusCode::kAlreadyExists);
  CHECK(r.AddCounter("requests_total", "Other help.", {"method"}).status().code() ==
        absl::StatusCode::kAlreadyExists);
  CHECK(r.AddCounter("requests_total", "Requests.").status().code() ==
        absl::StatusCode::kAlreadyExists);

  auto h = r.AddHistogram("latency_seconds", "Latency.", {}, {1, 2});
  REQUIRE(h.ok());
  CHECK(*r.AddHistogram("latency_seconds", "Latency.", {}, {1, 2}) == *h);
  CHECK_FALSE(r.AddHistogram("latency_seconds", "Latency.", {}, {1, 3}).ok());
  // A histogram's series names are taken too, both ways round.
  CHECK(r.AddCounter("latency_seconds_count", "x").status().code() ==
        absl::StatusCode::kAlreadyExists);
  REQUIRE(r.AddGauge("queue_sum", "x").ok());
  CHECK(r.AddHistogram("queue", "x", {}, {1}).status().code() == absl::StatusCode::kAlreadyExists);
}

TEST_CASE("metrics: label value count is checked", "[metrics]") {
  Registry r;
  auto f = r.AddCounter("c_total", "help", {"a", "b"});
  REQUIRE(f.ok());
  auto bad = (*f)->TryWithLabels({"only-one"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_FALSE((*f)->TryWithLabels({"1", "2", "3"}).ok());

  // WithLabels never crashes: the update goes to a detached child that is not exported.
  (*f)->WithLabels({"x"}).Increment(5);
  (*f)->WithLabels().Increment(5);
  CHECK(r.Collect().at(0).metrics.empty());

  auto good = (*f)->TryWithLabels({"1", "2"});
  REQUIRE(good.ok());
  CHECK(*good == &(*f)->WithLabels({"1", "2"}));
}

TEST_CASE("metrics: counter, gauge and histogram values", "[metrics]") {
  Registry r;
  Counter& c = (*r.AddCounter("c_total", "help"))->WithLabels();
  c.Increment();
  c.Increment(2.5);
  c.Increment(-1);  // a counter never goes down: ignored
  c.Increment(std::numeric_limits<double>::quiet_NaN());
  CHECK(c.Value() == 3.5);

  Gauge& g = (*r.AddGauge("g", "help"))->WithLabels();
  g.Set(10);
  g.Increment();
  g.Decrement(4);
  g.Increment(-0.5);
  CHECK(g.Value() == 6.5);

  Histogram& h = (*r.AddHistogram("h", "help", {}, {1, 2}))->WithLabels();
  for (double v : {0.5, 1.0, 1.5, 3.0}) h.Observe(v);
  MetricSnapshot s;
  h.SnapshotInto(s);
  CHECK(s.cumulative_counts == std::vector<std::uint64_t>{2, 3, 4});
  CHECK(s.count == 4);
  CHECK(s.sum == 6.0);
}

TEST_CASE("metrics: unlabelled families are exported from registration", "[metrics]") {
  Registry r;
  REQUIRE(r.AddCounter("started_total", "help").ok());
  REQUIRE(r.AddCounter("by_kind_total", "help", {"kind"}).ok());
  const auto families = r.Collect();
  REQUIRE(families.size() == 2);
  CHECK(families[0].name == "by_kind_total");
  CHECK(families[0].metrics.empty());
  CHECK(families[1].name == "started_total");
  REQUIRE(families[1].metrics.size() == 1);
  CHECK(families[1].metrics[0].value == 0);
}

TEST_CASE("metrics: concurrent updates from several threads sum exactly", "[metrics]") {
  Registry r;
  Family<Counter>* counters = *r.AddCounter("ops_total", "help", {"worker_kind"});
  Family<Gauge>* gauges = *r.AddGauge("in_flight", "help");
  Family<Histogram>* hist = *r.AddHistogram("op_seconds", "help", {"worker_kind"}, {0.5, 1});
  constexpr int kThreads = 8;
  constexpr int kIterations = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string kind = t % 2 == 0 ? "even" : "odd";
      for (int i = 0; i < kIterations; ++i) {
        // Looked up every time on purpose: the labelled lookup is part of what is under test.
        counters->WithLabels({kind}).Increment();
        counters->WithLabels({"all"}).Increment(2);
        gauges->WithLabels().Increment();
        gauges->WithLabels().Decrement(0.5);
        hist->WithLabels({kind}).Observe(i % 2 == 0 ? 0.25 : 0.75);
      }
    });
  }
  for (auto& t : threads) t.join();

  constexpr double kPerKind = kThreads / 2 * kIterations;
  CHECK(counters->WithLabels({"even"}).Value() == kPerKind);
  CHECK(counters->WithLabels({"odd"}).Value() == kPerKind);
  CHECK(counters->WithLabels({"all"}).Value() == 2.0 * kThreads * kIterations);
  CHECK(gauges->WithLabels().Value() == 0.5 * kThreads * kIterations);
  MetricSnapshot s;
  hist->WithLabels({"odd"}).SnapshotInto(s);
  CHECK(s.count == static_cast<std::uint64_t>(kPerKind));
  CHECK(s.cumulative_counts == std::vector<std::uint64_t>{static_cast<std::uint64_t>(kPerKind / 2),
                                                          static_cast<std::uint64_t>(kPerKind),
                                                          static_cast<std::uint64_t>(kPerKind)});
  CHECK(s.sum == kPerKind / 2 * 0.25 + kPerKind / 2 * 0.75);
}

TEST_CASE("metrics: concurrent registration and rendering", "[metrics]") {
  Registry r;
  std::atomic<int> failures{0};  // Catch2 assertions are not thread-safe: count in the threads
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto f = r.AddCounter("shared_total", "help", {"i"});
        if (!f.ok()) {
          ++failures;
          continue;
        }
        (*f)->WithLabels({std::to_string(i % 10)}).Increment();
        if (RenderText(r).find("# TYPE shared_total counter") == std::string::npos) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  const auto families = r.Collect();
  REQUIRE(families.size() == 1);
  REQUIRE(families[0].metrics.size() == 10);
  for (const auto& m : families[0].metrics) CHECK(m.value == 80);
}

TEST_CASE("metrics: the default registry is one process-wide instance", "[metrics]") {
  CHECK(&Registry::Default() == &Registry::Default());
}

TEST_CASE("metrics: series whose subject is gone are dropped from the export", "[metrics]") {
  Registry r;
  auto* family = *r.AddGauge("tessera_test_ratio", "help", {"run"});
  family->WithLabels({"a"}).Set(0.5);
  family->WithLabels({"b"}).Set(0.7);
  family->WithLabels({"c"}).Set(0.9);
  CHECK(family->RemoveUnless([](const std::vector<std::string>& l) { return l[0] != "b"; }) == 1);
  const std::string text = RenderText(r);
  CHECK(text.find("tessera_test_ratio{run=\"a\"} 0.5") != std::string::npos);
  CHECK(text.find("run=\"b\"") == std::string::npos);
  CHECK(text.find("tessera_test_ratio{run=\"c\"} 0.9") != std::string::npos);
  // A series dropped and set again starts afresh.
  family->WithLabels({"b"}).Set(0.1);
  CHECK(RenderText(r).find("tessera_test_ratio{run=\"b\"} 0.1") != std::string::npos);
  CHECK(family->RemoveUnless([](const std::vector<std::string>&) { return false; }) == 3);
  CHECK(RenderText(r).find("tessera_test_ratio{") == std::string::npos);
}

}  // namespace metrics_registry_test
}  // namespace tessera::metrics
