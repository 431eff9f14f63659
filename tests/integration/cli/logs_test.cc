// mcli logs and mcli run submit --follow against the fake LogService
// (tests/support/fake_services.h): each flag's request, the "[rank N] " prefix rule, raw and JSON
// output, follow until the stream ends, Ctrl-C, exit codes.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/integration/cli/mcli_runner.h"

using namespace mcli_test;  // NOLINT: the fakes and the runner are this test's vocabulary

namespace logs_test {

v1::GetLogsRequest OnlyRequest(FakeServer& server) {
  const std::vector<v1::GetLogsRequest> requests = server.logs.Requests();
  REQUIRE(requests.size() == 1);
  return requests[0];
}

// mcli run submit --follow of the sample run YAML with its name changed to `name`.
Result SubmitFollow(const TempDir& dir, const std::string& name) {
  std::string yaml = kRunYaml;
  yaml.replace(yaml.find("name: train"), 11, "name: " + name);
  return Mcli({"run", "submit", "-f", dir.Write("run.yaml", yaml), "--follow"});
}

TEST_CASE("logs without flags asks for the latest attempt of every rank", "[cli][logs]") {
  FakeServer& server = Server();
  const Result result = Mcli({"logs", "train-a"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const v1::GetLogsRequest request = OnlyRequest(server);
  CHECK(request.run_name() == "train-a");
  CHECK_FALSE(request.has_rank());
  CHECK_FALSE(request.has_node_rank());
  CHECK_FALSE(request.has_resumption_index());
  CHECK_FALSE(request.previous());
  CHECK_FALSE(request.failed());
  CHECK(request.tail() == 0);
  CHECK_FALSE(request.follow());
  CHECK_FALSE(request.first_exception());
}

TEST_CASE("logs maps every flag onto the request", "[cli][logs]") {
  FakeServer& server = Server();
  SECTION("rank, node rank, resumption, tail, failed, first exception, follow") {
    const Result result =
        Mcli({"logs", "train-a", "--rank", "0", "--node-rank", "0", "--resumption", "2", "--tail",
              "50", "--failed", "--first-exception", "--follow"});
    INFO(result);
    REQUIRE(result.exit_code == 0);
    const v1::GetLogsRequest request = OnlyRequest(server);
    CHECK((request.has_rank() && request.rank() == 0));  // 0 is sent, not left out
    CHECK((request.has_node_rank() && request.node_rank() == 0));
    CHECK((request.has_resumption_index() && request.resumption_index() == 2));
    CHECK(request.tail() == 50);
    CHECK(request.failed());
    CHECK(request.first_exception());
    CHECK(request.follow());
    CHECK_FALSE(request.previous());
  }
  SECTION("--prev, -f") {
    const Result result = Mcli({"logs", "train-a", "--prev", "-f"});
    INFO(result);
    REQUIRE(result.exit_code == 0);
    const v1::GetLogsRequest request = OnlyRequest(server);
    CHECK(request.previous());
    CHECK_FALSE(request.has_resumption_index());
    CHECK(request.follow());
  }
}

TEST_CASE("logs prints raw text, with [rank N] only when ranks are mixed", "[cli][logs]") {
  Server();
  SECTION("every rank: prefixed; stderr lines on stdout too; bytes as they were") {
    const Result result = Mcli({"logs", "per-rank-a"});
    INFO(result);
    REQUIRE(result.exit_code == 0);
    CHECK(result.out ==
          "[rank 0] step 1 loss 2.50\n"
          "[rank 1] warning: slow data loader\n"
          "[rank 0] bad \xff byte\n");
    CHECK(result.err.empty());
  }
  SECTION("one rank: no prefix") {
    const Result result = Mcli({"logs", "per-rank-a", "--rank", "0"});
    INFO(result);
    REQUIRE(result.exit_code == 0);
    CHECK(result.out == "step 1 loss 2.50\nbad \xff byte\n");
  }
  SECTION("--failed and --first-exception are one rank's output: no prefix") {
    CHECK(Mcli({"logs", "per-rank-a", "--failed"}).out.find("[rank") == std::string::npos);
    CHECK(Mcli({"logs", "per-rank-a", "--first-exception"}).out.find("[rank") == std::string::npos);
  }
}

TEST_CASE("logs takes mcli's GPU-rank flags: global as --rank, local by the run's placement",
          "[cli][logs]") {
  FakeServer& server = Server();
  SECTION("--global-gpu-rank is --rank") {
    REQUIRE(Mcli({"logs", "train-a", "--global-gpu-rank", "3"}).exit_code == 0);
    const v1::GetLogsRequest request = OnlyRequest(server);
    CHECK((request.has_rank() && request.rank() == 3));
  }
  SECTION("--local-gpu-rank of node rank 1, 4 GPUs a node: global rank 6") {
    const Result result = Mcli({"logs", "per-node-a", "--node-rank", "1", "--local-gpu-rank", "2"});
    INFO(result);
    REQUIRE(result.exit_code == 0);
    const v1::GetLogsRequest request = OnlyRequest(server);
    CHECK((request.has_rank() && request.rank() == 6));
    CHECK((request.has_node_rank() && request.node_rank() == 1));
  }
  SECTION("--local-gpu-rank alone is node rank 0's") {
    REQUIRE(Mcli({"logs", "per-node-a", "--local-gpu-rank", "3"}).exit_code == 0);
    CHECK(OnlyRequest(server).rank() == 3);
  }
  SECTION("a local rank the node does not have, or two ways to name the rank: one error") {
    const Result past = Mcli({"logs", "per-node-a", "--local-gpu-rank", "4"});
    CHECK(past.exit_code == 2);
    CHECK(past.err.find("node rank 0 of per-node-a has 4 GPU(s), local ranks 0 to 3") !=
          std::string::npos);
    const Result node = Mcli({"logs", "per-node-a", "--node-rank", "2", "--local-gpu-rank", "0"});
    CHECK(node.exit_code == 1);
    CHECK(node.err.find("has no node rank 2") != std::string::npos);
    const Result both = Mcli({"logs", "train-a", "--rank", "1", "--local-gpu-rank", "0"});
    CHECK(both.exit_code == 2);
    CHECK(both.err.find("give one of them") != std::string::npos);
    CHECK(server.logs.Requests().empty());
  }
}

TEST_CASE("logs of a run launched per node marks lines by node", "[cli][logs]") {
  Server();
  const Result result = Mcli({"logs", "per-node-a"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out ==
        "[node 0] step 1 loss 2.50\n"
        "[node 0] warning: slow data loader\n"
        "[node 0] bad \xff byte\n");
}

TEST_CASE("logs -o json prints one JSON object per line", "[cli][logs]") {
  Server();
  const Result result = Mcli({"logs", "train-a", "-o", "json"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto lines = Lines(result.out);
  REQUIRE(lines.size() == 3);
  const nlohmann::json first = nlohmann::json::parse(lines[0]);
  CHECK(first["text"] == "step 1 loss 2.50");
  CHECK(first["rank"] == 0);
  CHECK(first["node_name"] == "node-a");
  CHECK(first["stream"] == "LOG_STREAM_STDOUT");
  CHECK(first["time"] == "2023-11-14T22:13:21Z");
  CHECK_FALSE(first.contains("text_base64"));
  CHECK(nlohmann::json::parse(lines[1])["stream"] == "LOG_STREAM_STDERR");
  const nlohmann::json bad = nlohmann::json::parse(lines[2]);
  CHECK(bad["text"] == "bad \xEF\xBF\xBD byte");    // U+FFFD for the 0xFF byte
  CHECK(bad["text_base64"] == "YmFkIP8gYnl0ZQ==");  // the exact bytes
}

TEST_CASE("logs -f prints lines as they come until the server ends the stream", "[cli][logs]") {
  Server();
  const Result result = Mcli({"logs", "train-a", "-f"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  REQUIRE(Lines(result.out).size() == 3);
  REQUIRE(result.out_line_times.size() == 3);
  // The first line was printed when it came, not when the stream ended.
  CHECK(result.out_line_times[1] - result.out_line_times[0] > std::chrono::milliseconds(200));
}

TEST_CASE("Ctrl-C ends logs -f cleanly: lines printed, no error, exit 130", "[cli][logs]") {
  FakeServer& server = Server();
  const Result result = Mcli({"logs", "endless", "-f"}, {}, /*interrupt_after_lines=*/3);
  INFO(result);
  CHECK(result.exit_code == 130);
  CHECK(Lines(result.out).size() == 3);
  CHECK(result.err.empty());
  // The server saw the stream cancelled (mcli did not just die).
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard<std::mutex> lock(server.logs.mu);
      if (server.logs.cancelled == 1) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::lock_guard<std::mutex> lock(server.logs.mu);
  CHECK(server.logs.cancelled == 1);
}

TEST_CASE("logs: bad input is one line and exit 2, before any call", "[cli][logs]") {
  FakeServer& server = Server();
  const std::vector<std::vector<std::string>> cases = {
      {"logs", "train-a", "--prev", "--resumption", "1"},
      {"logs", "train-a", "--tail", "0"},
      {"logs", "train-a", "--rank", "-1"},
      {"logs", "train-a", "--node-rank", "x"},
      {"logs"},
  };
  for (const auto& args : cases) {
    const Result result = Mcli(args);
    INFO(result);
    CHECK(result.exit_code == 2);
    CHECK(Lines(result.err).size() == 1);
    CHECK_THAT(result.err, Catch::StartsWith("Error: "));
    CHECK(result.out.empty());
  }
  CHECK_THAT(Mcli(cases[0]).err, Catch::Contains("--prev") && Catch::Contains("--resumption"));
  CHECK(server.recorder.calls() == 0);
}

TEST_CASE("logs: a server error is one line and exit 1", "[cli][logs]") {
  Server();
  const Result result = Mcli({"logs", "missing"});
  INFO(result);
  CHECK(result.exit_code == 1);
  CHECK(result.err == "Error: run \"missing\" not found\n");
}

// The sample YAML says no `launch`: its run is launched per node, so lines are marked by node.
TEST_CASE("run submit --follow prints status changes, then logs, until the run ends",
          "[cli][submit][logs]") {
  FakeServer& server = Server();
  TempDir dir;
  SECTION("a run that completes: exit 0") {
    const Result result = SubmitFollow(dir, "train");
    INFO(result);
    REQUIRE(result.exit_code == 0);
    const auto lines = Lines(result.out);
    REQUIRE(lines.size() == 8);
    CHECK(lines[0] == "train-abc123");
    CHECK_THAT(lines[1], Catch::Contains("PENDING"));
    CHECK(lines[2] == "2023-11-14 22:13:21  STARTING     Run was placed on node-a");
    CHECK(lines[3] == "2023-11-14 22:13:22  RUNNING      Run started");
    CHECK(lines[4] == "[node 0] step 1 loss 2.50");
    CHECK(lines[5] == "[node 0] warning: slow data loader");
    CHECK(lines[6] == "[node 0] bad \xff byte");
    CHECK(lines[7] == "2023-11-14 22:13:30  COMPLETED    Run completed");
    CHECK(result.err.empty());
    const v1::GetLogsRequest request = OnlyRequest(server);
    CHECK(request.run_name() == "train-abc123");
    CHECK(request.follow());
    CHECK((request.has_resumption_index() && request.resumption_index() == 0));
  }
  SECTION("a run that fails: exit 1 with its final status") {
    const Result result = SubmitFollow(dir, "crash");
    INFO(result);
    CHECK(result.exit_code == 1);
    const auto lines = Lines(result.out);
    REQUIRE(!lines.empty());
    CHECK_THAT(lines.back(), Catch::Contains("FAILED") && Catch::Contains("exit code 1"));
    CHECK(result.err ==
          "Error: run crash-abc123 ended FAILED: Run failed with exit code 1 (rank 1 on node-a)\n");
  }
  SECTION("a run requeued after its first attempt: the logs of each attempt, exit 0") {
    const Result result = SubmitFollow(dir, "requeue");
    INFO(result);
    REQUIRE(result.exit_code == 0);
    const auto lines = Lines(result.out);
    REQUIRE(lines.size() == 14);
    CHECK(lines[3] == "2023-11-14 22:13:22  RUNNING      Run started");
    CHECK(lines[4] == "[node 0] step 1 loss 2.50");
    CHECK(lines[7] ==
          "2023-11-14 22:13:30  QUEUED       Run was placed back in the queue (node-a failed)");
    CHECK(lines[8] == "2023-11-14 22:13:41  STARTING     Run was placed on node-a");
    CHECK(lines[9] == "2023-11-14 22:13:42  RUNNING      Run started");
    CHECK(lines[10] == "[node 0] step 1 loss 2.50");
    CHECK(lines[13] == "2023-11-14 22:13:31  COMPLETED    Run completed");
    const std::vector<v1::GetLogsRequest> requests = server.logs.Requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[0].resumption_index() == 0);
    CHECK(requests[1].resumption_index() == 1);
    CHECK(requests[1].follow());
  }
  SECTION("a run that ends at once: each event with its own status, then every line") {
    // Every change reads the run as completed already; the follower still shows the attempt
    // starting, its lines, then the end.
    const Result result = SubmitFollow(dir, "quick");
    INFO(result);
    REQUIRE(result.exit_code == 0);
    const auto lines = Lines(result.out);
    REQUIRE(lines.size() == 8);
    CHECK(lines[2] == "2023-11-14 22:13:21  STARTING     Run was placed on node-a");
    CHECK(lines[3] == "2023-11-14 22:13:22  RUNNING      Run started");
    CHECK(lines[4] == "[node 0] step 1 loss 2.50");
    CHECK(lines[6] == "[node 0] bad \xff byte");
    CHECK(lines[7] == "2023-11-14 22:13:30  COMPLETED    Run completed");
  }
  SECTION("a run over before the follower looked: its lines, then its end with its message") {
    const Result result = SubmitFollow(dir, "instant");
    INFO(result);
    REQUIRE(result.exit_code == 0);
    const auto lines = Lines(result.out);
    REQUIRE(lines.size() == 5);
    CHECK(lines[0] == "instant-abc123");
    CHECK(lines[1] == "[node 0] step 1 loss 2.50");
    CHECK(lines[2] == "[node 0] warning: slow data loader");
    CHECK(lines[3] == "[node 0] bad \xff byte");
    CHECK(lines[4] == "2023-11-14 22:13:25  COMPLETED    Run completed");
    const v1::GetLogsRequest request = OnlyRequest(server);
    CHECK_FALSE(request.follow());  // the attempt is over: all its lines, no waiting
    CHECK((request.has_resumption_index() && request.resumption_index() == 0));
  }
  SECTION("logs that cannot be shown are a warning; the run is still followed to its end") {
    const Result result = SubmitFollow(dir, "nologs");
    INFO(result);
    CHECK(result.exit_code == 0);
    CHECK_THAT(Lines(result.out).back(), Catch::Contains("COMPLETED"));
    CHECK_THAT(result.err, Catch::StartsWith("Warning: cannot show the logs of run nologs-abc123: "
                                             "the server at ") &&
                               Catch::Contains("does not support this command"));
  }
}

}  // namespace logs_test
