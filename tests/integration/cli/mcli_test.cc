// The real mcli binary, run as a subprocess, against fake RunService, SchedulerService,
// CordonService and AdminService implementations on a real gRPC server at 127.0.0.1:0
// (tests/support/fake_services.h; mcli logs and run submit --follow: logs_test.cc). The fakes
// record every request and answer UNAUTHENTICATED unless the call carries
// `authorization: Bearer test-key`.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/integration/cli/mcli_runner.h"
#include "tests/support/free_port.h"

using namespace mcli_test;  // NOLINT: the fakes and the runner are this test's vocabulary

TEST_CASE("run submit sends the YAML's fields with the overrides applied", "[cli][submit]") {
  FakeServer& server = Server();
  TempDir dir;
  const std::string file = dir.Write("run.yaml", kRunYaml);

  const Result result = Mcli({"run", "submit", "-f", file, "--gpus", "16", "--priority", "high",
                              "--name", "renamed", "--cluster", "c2"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out == "renamed-abc123\n");
  CHECK(result.err.empty());

  std::lock_guard<std::mutex> lock(server.runs.mu);
  REQUIRE(server.runs.submits.size() == 1);
  const v1::SubmitRunRequest& request = server.runs.submits[0];
  CHECK(IsUuid(request.idempotency_key()));
  CHECK(request.spec().name() == "renamed");
  CHECK(request.spec().image() == "pytorch:2.1");
  CHECK(request.spec().command() == "python train.py --steps 100");
  CHECK(request.spec().compute().gpus() == 16);
  CHECK(request.spec().compute().cluster() == "c2");
  CHECK(request.spec().compute().gpu_type() == "h100");
  CHECK(request.spec().scheduling().priority() == v1::PRIORITY_HIGH);
  CHECK(request.spec().scheduling().max_duration_hours() == 12);
  REQUIRE(request.spec().env_variables_size() == 1);
  CHECK(request.spec().env_variables(0).key() == "SEED");
  CHECK(request.spec().env_variables(0).value() == "17");
}

TEST_CASE("mcli run -f is the short form, with a fresh or given idempotency key", "[cli][submit]") {
  FakeServer& server = Server();
  TempDir dir;
  const std::string file = dir.Write("run.yaml", kRunYaml);
  REQUIRE(Mcli({"run", "-f", file}).exit_code == 0);
  REQUIRE(Mcli({"run", "-f", file}).exit_code == 0);
  const Result keyed = Mcli({"run", "-f", file, "--idempotency-key", "my-key"});
  INFO(keyed);
  REQUIRE(keyed.exit_code == 0);
  CHECK(keyed.out == "train-abc123\n");

  std::lock_guard<std::mutex> lock(server.runs.mu);
  REQUIRE(server.runs.submits.size() == 3);
  CHECK(server.runs.submits[0].spec().compute().gpus() == 8);
  CHECK(server.runs.submits[0].spec().scheduling().priority() == v1::PRIORITY_LOW);
  CHECK(server.runs.submits[0].idempotency_key() != server.runs.submits[1].idempotency_key());
  CHECK(server.runs.submits[2].idempotency_key() == "my-key");
}

TEST_CASE("a bad run YAML fails with its line and sends nothing", "[cli][submit]") {
  FakeServer& server = Server();
  TempDir dir;
  const std::string file =
      dir.Write("bad.yaml", "name: train\ncommand: python train.py\ncompute:\n  gpus: lots\n");
  const Result result = Mcli({"run", "submit", "-f", file});
  INFO(result);
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK_THAT(result.err, Catch::StartsWith("Error: " + file + ": line 4"));
  CHECK_THAT(result.err, Catch::Contains("compute.gpus"));
  CHECK(Lines(result.err).size() == 1);
  CHECK(server.recorder.calls() == 0);

  const std::string unknown =
      dir.Write("unknown.yaml", "name: t\ncommand: c\ncompute:\n  gpu: 8\n");
  const Result unknown_result = Mcli({"run", "-f", unknown});
  CHECK(unknown_result.exit_code == 2);
  CHECK_THAT(unknown_result.err, Catch::Contains("line 4") && Catch::Contains("compute.gpu"));
  CHECK(server.recorder.calls() == 0);
}

TEST_CASE("get runs prints an aligned table and sends the filter", "[cli][get]") {
  FakeServer& server = Server();
  const Result result =
      Mcli({"get", "runs", "train-*", "--status", "running", "--status", "queued,failed", "--user",
            "alice", "--cluster", "c1", "--gpu-type", "h100", "--limit", "5", "--after", "2h",
            "--before", "2023-11-14T22:13:20Z"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto lines = Lines(result.out);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] ==
        "NAME             USER   CLUSTER  GPUS  STATUS   RESUMPTION  PROGRESS      CREATED");
  CHECK(lines[1] ==
        "train-a          alice  c1       8     RUNNING  0           -             2023-11-14 "
        "22:13:20");
  CHECK(lines[2] ==
        "train-long-name  bob    c1       8     QUEUED   2           50/200 (25%)  2023-11-14 "
        "22:13:20");

  std::lock_guard<std::mutex> lock(server.runs.mu);
  REQUIRE(server.runs.lists.size() == 1);
  const v1::RunFilter& filter = server.runs.lists[0].filter();
  REQUIRE(filter.name_globs_size() == 1);
  CHECK(filter.name_globs(0) == "train-*");
  REQUIRE(filter.statuses_size() == 3);
  CHECK(filter.statuses(0) == v1::RUN_STATUS_RUNNING);
  CHECK(filter.statuses(1) == v1::RUN_STATUS_QUEUED);
  CHECK(filter.statuses(2) == v1::RUN_STATUS_FAILED);
  CHECK(filter.user() == "alice");
  CHECK(filter.cluster() == "c1");
  CHECK(filter.gpu_type() == "h100");
  CHECK(filter.limit() == 5);
  CHECK(filter.created_before().seconds() == kT0);
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  CHECK(std::abs(filter.created_after().seconds() - (now - 7200)) < 120);
}

TEST_CASE("get runs -o json prints protobuf JSON with proto field names", "[cli][get]") {
  Server();
  const Result result = Mcli({"get", "runs", "-o", "json"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto json = nlohmann::json::parse(result.out);
  REQUIRE(json.is_array());
  REQUIRE(json.size() == 2);
  CHECK(json[0]["name"] == "train-a");
  CHECK(json[0]["status"] == "RUN_STATUS_RUNNING");
  CHECK(json[0]["spec"]["compute"]["gpus"] == 8);
  CHECK(json[0]["created_at"] == "2023-11-14T22:13:20Z");
  CHECK(json[1]["resumption_index"] == 2);
  CHECK(json[1]["progress"]["total_steps"] == "200");  // int64 is a string in proto JSON
  CHECK(json[0].contains("status_reason"));
}

TEST_CASE("get runs -o yaml prints the same document as YAML", "[cli][get]") {
  Server();
  const Result result = Mcli({"--output", "yaml", "get", "runs"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const YAML::Node yaml = YAML::Load(result.out);
  REQUIRE(yaml.IsSequence());
  REQUIRE(yaml.size() == 2);
  CHECK(yaml[0]["name"].as<std::string>() == "train-a");
  CHECK(yaml[0]["status"].as<std::string>() == "RUN_STATUS_RUNNING");
  CHECK(yaml[1]["user"].as<std::string>() == "bob");
  CHECK(yaml[1]["resumption_index"].as<int>() == 2);
}

TEST_CASE("get nodes and whoami", "[cli][get]") {
  Server();
  const Result nodes = Mcli({"get", "nodes", "--cluster", "c7"});
  INFO(nodes);
  REQUIRE(nodes.exit_code == 0);
  const auto lines = Lines(nodes.out);
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0], Catch::StartsWith("NAME    CLUSTER"));
  CHECK_THAT(lines[1], Catch::StartsWith("node-a  c7") && Catch::Contains("SCHEDULABLE"));

  const Result whoami = Mcli({"whoami"});
  INFO(whoami);
  REQUIRE(whoami.exit_code == 0);
  CHECK(whoami.out == "alice (admin) at " + Instance().endpoint() + "\n");
}

TEST_CASE("describe run shows attempts, their nodes and reasons, and events", "[cli][describe]") {
  Server();
  const Result result = Mcli({"describe", "run", "train-a"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const std::string& text = result.out;
  CHECK_THAT(text, Catch::Contains("Run:") && Catch::Contains("train-a"));
  CHECK_THAT(text, Catch::Contains("Compute:") && Catch::Contains("8 GPUs, cluster c1"));
  CHECK_THAT(text, Catch::Contains("Pending time:") && Catch::Contains("2m 5s"));
  CHECK_THAT(text, Catch::Contains("Attempts:"));
  CHECK_THAT(text, Catch::Contains("2023-11-14 22:14:20  2023-11-14 23:13:20  node-a,node-b"));
  CHECK_THAT(text, Catch::Contains("GPU_FAULT: XID 79 on GPU 3"));
  CHECK_THAT(text, Catch::Contains("node-c"));
  CHECK_THAT(text, Catch::Contains("Events:"));
  CHECK_THAT(text, Catch::Contains("2023-11-14 23:13:20") &&
                       Catch::Contains("Run was placed back in the scheduling queue"));
  CHECK_THAT(text, Catch::Contains("Run spec:") && Catch::Contains("python train.py"));

  const Result json = Mcli({"describe", "run", "train-a", "-o", "json"});
  REQUIRE(json.exit_code == 0);
  const auto document = nlohmann::json::parse(json.out);
  CHECK(document["attempts"][0]["end_reason"] == "ATTEMPT_END_REASON_GPU_FAULT");
  CHECK(document["events"][0]["message"] == "Run was placed back in the scheduling queue");

  const Result missing = Mcli({"describe", "run", "nope"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err == "Error: run \"nope\" not found\n");
}

TEST_CASE("stop run sends each name with the reason", "[cli][stop]") {
  FakeServer& server = Server();
  const Result result = Mcli({"stop", "run", "train-a", "train-b", "--reason", "bad lr"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out == "Stopping run train-a (TERMINATING)\nStopping run train-b (TERMINATING)\n");

  {
    std::lock_guard<std::mutex> lock(server.runs.mu);
    REQUIRE(server.runs.stops.size() == 2);
    CHECK(server.runs.stops[0].name() == "train-a");
    CHECK(server.runs.stops[1].name() == "train-b");
    CHECK(server.runs.stops[0].reason() == "bad lr");
    CHECK(server.runs.stops[1].reason() == "bad lr");
    CHECK(IsUuid(server.runs.stops[0].idempotency_key()));
    CHECK(server.runs.stops[0].idempotency_key() != server.runs.stops[1].idempotency_key());
  }

  // A run that does not exist fails alone; the others are still stopped.
  const Result partial = Mcli({"stop", "run", "missing", "train-c"});
  INFO(partial);
  CHECK(partial.exit_code == 1);
  CHECK(partial.err == "Error: missing: run \"missing\" not found\n");
  CHECK(partial.out == "Stopping run train-c (TERMINATING)\n");
}

TEST_CASE("cordon sends the node and the reason", "[cli][cordon]") {
  FakeServer& server = Server();
  const Result result = Mcli({"cordon", "node-a", "--reason", "XID 79 on GPU 3"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out == "Cordoned node node-a (CORDONED)\n");
  std::lock_guard<std::mutex> lock(server.cordon.mu);
  REQUIRE(server.cordon.cordons.size() == 1);
  CHECK(server.cordon.cordons[0].node_name() == "node-a");
  CHECK(server.cordon.cordons[0].reason() == "XID 79 on GPU 3");
  CHECK(IsUuid(server.cordon.cordons[0].idempotency_key()));
}

TEST_CASE("get events -f prints streamed events as they come", "[cli][events]") {
  FakeServer& server = Server();
  const Result result = Mcli({"get", "events", "-f", "--node", "node-a"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto lines = Lines(result.out);
  REQUIRE(lines.size() == 3);
  CHECK_THAT(lines[0], Catch::StartsWith("TIME") && Catch::Contains("REASON"));
  CHECK(lines[1].find("NODE") == std::string::npos);
  CHECK_THAT(lines[1], Catch::StartsWith("2023-11-14 22:13:20  node-a") &&
                           Catch::Contains("CORDONED") && Catch::Contains("health-api") &&
                           Catch::EndsWith("XID 79 on GPU 3"));
  CHECK_THAT(lines[2], Catch::StartsWith("2023-11-14 22:13:21  node-a") &&
                           Catch::Contains("HEALTH_CHECK_PASSED") &&
                           Catch::EndsWith("passed the all-reduce canary"));
  CHECK(lines[1].find("CORDONED") == lines[0].find("EVENT"));
  // The first event was printed when it came, not when the stream ended.
  REQUIRE(result.out_line_times.size() == 3);
  CHECK(result.out_line_times[2] - result.out_line_times[1] > std::chrono::milliseconds(200));

  std::lock_guard<std::mutex> lock(server.cordon.mu);
  REQUIRE(server.cordon.watches.size() == 1);
  REQUIRE(server.cordon.watches[0].filter().node_names_size() == 1);
  CHECK(server.cordon.watches[0].filter().node_names(0) == "node-a");
}

TEST_CASE("get events --follow -o json prints one JSON document per line", "[cli][events]") {
  Server();
  const Result result = Mcli({"get", "events", "--follow", "-o", "json"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto lines = Lines(result.out);
  REQUIRE(lines.size() == 2);
  CHECK(nlohmann::json::parse(lines[0])["reason"] == "XID 79 on GPU 3");
  CHECK(nlohmann::json::parse(lines[1])["type"] == "NODE_EVENT_TYPE_HEALTH_CHECK_PASSED");
}

TEST_CASE("a wrong API key is exit 1 with the hint to set one", "[cli][auth]") {
  FakeServer& server = Server();
  const Result result = Mcli({"get", "runs"}, {{"TESSERA_API_KEY", "wrong-key"}});
  INFO(result);
  CHECK(result.exit_code == 1);
  CHECK(result.out.empty());
  CHECK_THAT(result.err, Catch::StartsWith("Error: the server rejected the API key") &&
                             Catch::Contains("mcli set api-key"));
  CHECK(Lines(result.err).size() == 1);
  CHECK(server.recorder.rejected() == 1);

  const Result none = Mcli({"get", "runs"}, {{"TESSERA_API_KEY", ""}});
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.err, Catch::Contains("no API key is set") && Catch::Contains("mcli set api-key"));
}

TEST_CASE("the key and endpoint saved by mcli set are used", "[cli][auth]") {
  FakeServer& server = Server();
  TempDir home;
  const std::map<std::string, std::string> env = {
      {"HOME", home.path}, {"TESSERA_API_KEY", ""}, {"TESSERA_ENDPOINT", ""}};
  REQUIRE(Mcli({"set", "api-key", kApiKey}, env).exit_code == 0);
  REQUIRE(Mcli({"set", "endpoint", server.endpoint()}, env).exit_code == 0);
  const Result result = Mcli({"whoami"}, env);
  INFO(result);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::StartsWith("alice (admin)"));
  // A flag beats the file.
  const Result flagged = Mcli({"whoami", "--api-key", "wrong"}, env);
  CHECK(flagged.exit_code == 1);
}

TEST_CASE("a server that is down is exit 1 naming the endpoint", "[cli][auth]") {
  const std::string endpoint = "127.0.0.1:" + std::to_string(tessera::testing::FreePort());

  const Result result = Mcli({"get", "runs"}, {{"TESSERA_ENDPOINT", endpoint}});
  INFO(result);
  CHECK(result.exit_code == 1);
  CHECK(result.out.empty());
  CHECK_THAT(result.err,
             Catch::StartsWith("Error: cannot reach the Tessera server at " + endpoint));
  CHECK(Lines(result.err).size() == 1);
}
