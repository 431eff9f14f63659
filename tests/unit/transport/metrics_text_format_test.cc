#include <catch2/catch.hpp>
#include <cstdlib>
#include <limits>
#include <string>

#include "transport/metrics/registry.h"
#include "transport/metrics/text_format.h"

namespace tessera::metrics {
namespace metrics_text_format_test {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST_CASE("metrics text: counter with labels and escaping", "[metrics]") {
  Registry r;
  auto f = r.AddCounter("http_requests_total", "Requests served.\nSecond line: C:\\path \"q\"",
                        {"method", "path"});
  REQUIRE(f.ok());
  (*f)->WithLabels({"POST", "/"}).Increment();
  (*f)->WithLabels({"GET", "/a\"b\\c\nd"}).Increment(3);
  CHECK(RenderText(r) ==
        "# HELP http_requests_total Requests served.\\nSecond line: C:\\\\path \"q\"\n"
        "# TYPE http_requests_total counter\n"
        "http_requests_total{method=\"GET\",path=\"/a\\\"b\\\\c\\nd\"} 3\n"
        "http_requests_total{method=\"POST\",path=\"/\"} 1\n");
}

TEST_CASE("metrics text: gauge, families sorted by name, empty help", "[metrics]") {
  Registry r;
  (*r.AddGauge("zeta_temperature_celsius", "Temperature."))->WithLabels().Set(-2.5);
  (*r.AddGauge("alpha_items", ""))->WithLabels().Set(1e6);
  REQUIRE(r.AddCounter("mid_total", "Labelled, no children yet.", {"k"}).ok());
  CHECK(RenderText(r) ==
        "# TYPE alpha_items gauge\n"
        "alpha_items 1000000\n"
        "# HELP mid_total Labelled, no children yet.\n"
        "# TYPE mid_total counter\n"
        "# HELP zeta_temperature_celsius Temperature.\n"
        "# TYPE zeta_temperature_celsius gauge\n"
        "zeta_temperature_celsius -2.5\n");
}

TEST_CASE("metrics text: histogram buckets are cumulative with +Inf, sum and count", "[metrics]") {
  Registry r;
  auto f = r.AddHistogram("rpc_seconds", "RPC latency.", {"op"}, {0.25, 1, 10});
  REQUIRE(f.ok());
  Histogram& read = (*f)->WithLabels({"read"});
  for (double v : {0.125, 0.25, 0.5, 20.0}) read.Observe(v);
  (*f)->WithLabels({"write"}).Observe(2);
  CHECK(RenderText(r) ==
        "# HELP rpc_seconds RPC latency.\n"
        "# TYPE rpc_seconds histogram\n"
        "rpc_seconds_bucket{op=\"read\",le=\"0.25\"} 2\n"
        "rpc_seconds_bucket{op=\"read\",le=\"1\"} 3\n"
        "rpc_seconds_bucket{op=\"read\",le=\"10\"} 3\n"
        "rpc_seconds_bucket{op=\"read\",le=\"+Inf\"} 4\n"
        "rpc_seconds_sum{op=\"read\"} 20.875\n"
        "rpc_seconds_count{op=\"read\"} 4\n"
        "rpc_seconds_bucket{op=\"write\",le=\"0.25\"} 0\n"
        "rpc_seconds_bucket{op=\"write\",le=\"1\"} 0\n"
        "rpc_seconds_bucket{op=\"write\",le=\"10\"} 1\n"
        "rpc_seconds_bucket{op=\"write\",le=\"+Inf\"} 1\n"
        "rpc_seconds_sum{op=\"write\"} 2\n"
        "rpc_seconds_count{op=\"write\"} 1\n");
}

TEST_CASE("metrics text: unlabelled histogram", "[metrics]") {
  Registry r;
  (*r.AddHistogram("q", "Q.", {}, {0.0005}))->WithLabels().Observe(0.0001);
  CHECK(RenderText(r) ==
        "# HELP q Q.\n"
        "# TYPE q histogram\n"
        "q_bucket{le=\"0.0005\"} 1\n"
        "q_bucket{le=\"+Inf\"} 1\n"
        "q_sum 0.0001\n"
        "q_count 1\n");
}

TEST_CASE("metrics text: special and round-tripping floats", "[metrics]") {
  CHECK(FormatValue(kInf) == "+Inf");
  CHECK(FormatValue(-kInf) == "-Inf");
  CHECK(FormatValue(kNaN) == "NaN");
  CHECK(FormatValue(0) == "0");
  CHECK(FormatValue(-0.0) == "0");
  CHECK(FormatValue(42) == "42");
  CHECK(FormatValue(-7) == "-7");
  CHECK(FormatValue(1e6) == "1000000");
  CHECK(FormatValue(123456789012345.0) == "123456789012345");
  CHECK(FormatValue(0.1) == "0.1");
  CHECK(FormatValue(0.0005) == "0.0005");
  CHECK(FormatValue(2.5) == "2.5");
  CHECK(FormatValue(1e20) == "1e+20");
  CHECK(FormatValue(1.5e-7) == "1.5e-07");
  CHECK(FormatValue(1e-5) == "1e-05");
  CHECK(FormatValue(123456.7) == "123456.7");
  CHECK(FormatValue(-0.25) == "-0.25");
  CHECK(FormatValue(1.5e20) == "1.5e+20");
  for (double v : {0.1 + 0.2, 1.0 / 3, 6.02214076e23, 5e-324, 1.7976931348623157e308, -123.456e-10,
                   9007199254740993.0, 4503599627370497.5}) {
    const std::string s = FormatValue(v);
    INFO(s);
    CHECK(std::strtod(s.c_str(), nullptr) == v);
  }

  Registry r;
  Family<Gauge>* g = *r.AddGauge("g", "", {"case"});
  g->WithLabels({"inf"}).Set(kInf);
  g->WithLabels({"minus_inf"}).Set(-kInf);
  g->WithLabels({"nan"}).Set(kNaN);
  g->WithLabels({"third"}).Set(1.0 / 3);
  CHECK(RenderText(r) ==
        "# TYPE g gauge\n"
        "g{case=\"inf\"} +Inf\n"
        "g{case=\"minus_inf\"} -Inf\n"
        "g{case=\"nan\"} NaN\n"
        "g{case=\"third\"} 0.3333333333333333\n");
}

TEST_CASE("metrics text: escaping helpers", "[metrics]") {
  CHECK(EscapeHelp("a\\b\nc\"d") == "a\\\\b\\nc\"d");
  CHECK(EscapeLabelValue("a\\b\nc\"d") == "a\\\\b\\nc\\\"d");
  CHECK(EscapeLabelValue("ünïcode ok") == "ünïcode ok");
  CHECK(kTextContentType == "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace metrics_text_format_test
}  // namespace tessera::metrics
