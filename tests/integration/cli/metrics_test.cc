// mcli get metrics against the fake RunMetricsService (tests/support/fake_services.h): the table
// with its resumption line, JSON, CSV that reads back exactly, the attempt filter, and the
// errors (a missing run, -o csv on a command that has no CSV).

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "tests/integration/cli/mcli_runner.h"

using namespace mcli_test;  // NOLINT: the fakes and the runner are this test's vocabulary

TEST_CASE("get metrics shows a run's history and why each attempt resumed", "[cli][metrics]") {
  FakeServer& server = Server();
  const Result result = Mcli({"get", "metrics", "train-a"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto request = server.recorder.LastAs<v1::GetRunMetricsRequest>("GetRunMetrics");
  CHECK(request.name() == "train-a");
  CHECK_FALSE(request.has_resumption_index());
  CHECK_THAT(result.out, Catch::Contains("ATTEMPT") && Catch::Contains("LOSS") &&
                             Catch::Contains("TOKENS/S") && Catch::Contains("MFU"));
  CHECK_THAT(result.out, Catch::Contains("2.2500") && Catch::Contains("42.0%"));
  CHECK_THAT(result.out, Catch::Contains("attempt 1 resumed from step 20") &&
                             Catch::Contains("attempt 0 ended: NODE_FAILURE (node-2 lost)"));

  const Result one = Mcli({"get", "metrics", "train-a", "--resumption", "1"});
  REQUIRE(one.exit_code == 0);
  const auto only = server.recorder.LastAs<v1::GetRunMetricsRequest>("GetRunMetrics");
  REQUIRE(only.has_resumption_index());
  CHECK(only.resumption_index() == 1);
}

TEST_CASE("get metrics -o csv and -o json carry every figure exactly", "[cli][metrics]") {
  Server();
  const Result csv = Mcli({"get", "metrics", "train-a", "-o", "csv"});
  INFO(csv);
  REQUIRE(csv.exit_code == 0);
  // Each number in its shortest exact form (0.0003 is 3e-04).
  const std::vector<std::string> lines = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "resumption_index,step,time,loss,learning_rate,tokens_per_second,mfu");
  CHECK(lines[1] == "0,10,2023-11-14T22:13:30.250000Z,2.5,3e-04,1500.5,0.42");
  CHECK(lines[3] == "1,30,2023-11-14T22:13:50.250000Z,nan,3e-04,1500.5,0.42");

  const Result json = Mcli({"get", "metrics", "train-a", "-o", "json"});
  REQUIRE(json.exit_code == 0);
  const auto document = nlohmann::json::parse(json.out);
  CHECK(document["run_name"] == "train-a");
  CHECK(document["total_steps"] == "100");  // int64 is a string in protobuf's JSON
  REQUIRE(document["points"].size() == 3);
  CHECK(document["points"][1]["loss"] == 2.25);
  CHECK(document["points"][2]["loss"] == "NaN");
  CHECK(document["attempts"][0]["reason"] == "node-2 lost");
}

TEST_CASE("get metrics errors: a missing run or csv for a command without it", "[cli][metrics]") {
  FakeServer& server = Server();
  const Result missing = Mcli({"get", "metrics", "nope"});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Catch::Contains("nope") && Catch::Contains("not found"));

  const Result runs = Mcli({"get", "runs", "-o", "csv"});
  CHECK(runs.exit_code == 2);
  CHECK_THAT(runs.err,
             Catch::Contains("-o csv is for `mcli get metrics` and `mcli get usage` only"));
  const Result no_run = Mcli({"get", "metrics"});
  CHECK(no_run.exit_code == 2);
  CHECK_THAT(no_run.err, Catch::Contains("RUN"));
  CHECK(server.recorder.calls() == 1);  // only the missing run's call reached the server
}
