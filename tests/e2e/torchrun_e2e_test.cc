// A user's own PyTorch script through the whole platform, as examples/torchrun-ddp.yaml runs it:
// torchrun started once per node by the run's command, DistributedDataParallel over Gloo,
// checkpoints in the shared folder, progress told to Tessera through tessera_sdk.progress (the
// script and the SDK's module packed by mcli's `local` integrations). A node is killed: the run,
// which accepts one node of its two, resumes on the one left, then grows back onto both right
// after the checkpoint the script reports once the node returns, and finishes.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "tests/e2e/training_helpers.h"

namespace tessera::testing {
namespace torchrun_e2e_test {

constexpr int kSteps = 400;  // the example's --steps
constexpr int kSaveEvery = 20;

// examples/torchrun-ddp.yaml with its `local` paths made absolute (mcli packs them from
// wherever the test runs) and Gloo on loopback (this machine's nodes share it), written next to
// the cluster's markers.
std::string ExampleCopy(LocalCluster& c) {
  const std::string source = TESSERA_SOURCE_DIR;
  std::ifstream in(source + "/examples/torchrun-ddp.yaml");
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* path : {"    path: examples/torchrun\n", "    path: sdk/python/tessera_sdk\n",
                           "--steps 400 --save-every 20 "}) {
    REQUIRE(absl::StrContains(yaml, path));
  }
  yaml = absl::StrReplaceAll(
      yaml, {{"    path: examples/", "    path: " + source + "/examples/"},
             {"    path: sdk/", "    path: " + source + "/sdk/"},
             {"\nintegrations:\n", "\nenv_variables:\n  GLOO_SOCKET_IFNAME: lo\nintegrations:\n"}});
  const std::string path = c.marks_dir() + "/torchrun-ddp.yaml";
  std::ofstream(path) << yaml;
  return path;
}

TEST_CASE(
    "a torchrun script that reports through tessera_sdk.progress: its steps reach mcli, and with "
    "a node killed it resumes on the one left, then grows back to both right after its next "
    "checkpoint once the node returns",
    "[e2e]") {
  LocalCluster c(AttemptCountingFlags({"--shrink-after-seconds", "3"}));
  StartTrainingWorkers(c, 2);
  const std::string shared = c.marks_dir() + "/shared";
  ShellResult submitted = c.Mcli("run -f " + ExampleCopy(c));
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  const std::string name(absl::StripAsciiWhitespace(submitted.output));

  // The script's own reports are the run's progress.
  const v1::Run early = WaitForStep(c, name, 10);
  CHECK(early.progress().total_steps() == kSteps);
  CHECK(early.progress().loss() > 0);

  const std::string victim = KillANodeAfterACheckpoint(c, name);
  WaitForShrunk(c, name, victim, absl::Now());

  StartTrainingWorker(c, victim, shared);
  const v1::Run run = WaitForCompletion(c, name, kSteps);
  ShellResult described = c.Mcli("describe run " + name);
  INFO(described.output);
  CHECK(run.resumption_index() == 2);
  CHECK(run.nodes_size() == 2);
  CHECK(
      absl::StrContains(described.output, "Resumed on 1 of its 2 nodes (compute.min_nodes is 1)"));
  std::smatch waited;
  REQUIRE(std::regex_search(described.output, waited,
                            std::regex(R"(checkpoint of step (\d+) to resume on all of them)")));
  const int64_t waited_for = std::stoll(waited[1]);
  CHECK(waited_for % kSaveEvery == 0);

  ShellResult metrics = c.Mcli("get metrics " + name + " -o json");
  REQUIRE(metrics.exit_code == 0);
  const auto history = nlohmann::json::parse(metrics.output);
  REQUIRE(history["attempts"].size() == 3);
  CHECK(history["attempts"][0]["end_reason"] == "ATTEMPT_END_REASON_NODE_FAILURE");
  CHECK(history["attempts"][1]["end_reason"] == "ATTEMPT_END_REASON_RESIZED");

  // What rank 0 printed in each attempt: the world it trained in, the step it resumed from (a
  // checkpoint the script committed; the grown attempt's no older than the one the stop waited
  // for), and a loss that fell.
  const auto resumed = [&](int resumption) {
    const std::string log =
        c.Mcli(absl::StrCat("logs ", name, " --rank 0 --resumption ", resumption)).output;
    INFO(log);
    std::smatch m;
    REQUIRE(std::regex_search(log, m,
                              std::regex(R"((starting|resumed) from step (\d+) on (\d+) ranks)")));
    return std::make_pair(std::stoi(m[2]), std::stoi(m[3]));
  };
  CHECK(resumed(0) == std::make_pair(0, 4));
  const auto [on_one_from, on_one_world] = resumed(1);
  const auto [grown_from, grown_world] = resumed(2);
  CHECK(on_one_world == 2);
  CHECK(grown_world == 4);
  CHECK(on_one_from >= 40);
  CHECK(on_one_from % kSaveEvery == 0);
  CHECK(grown_from >= waited_for);
  CHECK(grown_from % kSaveEvery == 0);
  std::printf(
      "torchrun: shrunk from step %d, grew back after the checkpoint of step %lld, from "
      "step %d\n",
      on_one_from, static_cast<long long>(waited_for), grown_from);
  const std::string last = c.Mcli("logs " + name + " --rank 0 --resumption 2").output;
  INFO(last);
  CHECK(absl::StrContains(last, "training finished: 400 steps"));
  const std::string first = c.Mcli("logs " + name + " --rank 0 --resumption 0").output;
  std::smatch first_loss, last_loss;
  REQUIRE(std::regex_search(first, first_loss, std::regex(R"(step 10/400: loss ([0-9.]+))")));
  REQUIRE(std::regex_search(last, last_loss, std::regex(R"(step 400/400: loss ([0-9.]+))")));
  CHECK(std::stod(last_loss[1]) < std::stod(first_loss[1]));
}

}  // namespace torchrun_e2e_test
}  // namespace tessera::testing
