// examples/gpt-tiny.yaml as a cluster of images runs it: its image (tessera-train, its
// libraries and the text it trains on, nothing of the host's) pulled from a registry by each
// node, its ranks sandboxed as the user's own uid; a node killed mid-training, after which the
// run resumes from its checkpoint on the same image, by digest, on a node that never pulled it.

#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "tests/e2e/training_helpers.h"
#include "tests/support/oci_registry.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace train_image_e2e_test {

TEST_CASE("gpt-tiny in its image: a node killed, the run resumes on the same digest", "[e2e]") {
  TempDir registry_dir("tessera-registry");
  auto registry = OciRegistry::Start(registry_dir.path);
  REQUIRE(registry.ok());
  auto image = registry->PushTrainingImage("tessera/train", "1", TESSERA_BIN_DIR);
  INFO(image.status().ToString());
  REQUIRE(image.ok());

  // What is measured is a run in its image resuming on the same digest. Three simulated nodes
  // share this machine's cores with the training: a step that lags can make the straggler watch
  // move the run off a healthy node and leave it queued behind that node's sweep (seen once in a
  // fresh-clone test run, 2026-12-07; issue 47's subject, not this test's). Straggler moves are
  // kept out of it, as in the control-plane fault cases.
  LocalCluster c({"--straggler-factor", "100"});
  const std::string shared = c.marks_dir() + "/shared";
  std::filesystem::create_directories(shared);
  OpenToPassThrough(shared);
  for (const char* node : {"node-a", "node-b", "node-c"}) {
    // No --rank-user: each user's ranks run as the uid the control plane gave that user.
    c.StartWorker(node, 2,
                  {"--sandbox", "bwrap", "--rank-user", "", "--insecure-registry",
                   registry->address(), "--shared-dir", shared});
    OpenToPassThrough(c.worker(node).state_dir);
  }
  // The example, in the image and long enough to be killed mid-way.
  const int steps = KillableRunSteps();
  // With in-memory checkpoints: the node's memory folder, bound into the sandbox, holds them.
  const std::string spec = ExampleIn(c.marks_dir(), steps, "gpt-tiny-image.yaml", *image);
  {
    std::ifstream in(spec);
    std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(absl::StrContains(yaml, "  save_interval: 25ba\n"));
    std::ofstream(spec) << absl::StrReplaceAll(
        yaml, {{"  save_interval: 25ba\n",
                "  save_interval: 25ba\n  memory_checkpoint_interval: 5ba\n"}});
  }
  ShellResult submitted = c.Mcli("run -f " + spec);
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  const std::string name(absl::StripAsciiWhitespace(submitted.output));
  // Pulling 700 MB on two nodes at once takes a while on a small machine; so does the pull by
  // the node that takes over.
  const absl::Duration pull_budget = absl::Seconds(300);
  const std::string victim = KillANodeAfterACheckpoint(c, name, pull_budget);
  v1::Run run = WaitForCompletion(c, name, steps, pull_budget);
  CHECK(run.resumption_index() == 1);
  CHECK(run.progress().step() == steps);
  const v1::RunDescription described = c.client->Describe(name);
  REQUIRE(described.attempts_size() == 2);
  const std::string digest = described.attempts(0).image_digest();
  CHECK(absl::StartsWith(digest, "sha256:"));
  CHECK(described.attempts(1).image_digest() == digest);
  // The second attempt ran on the nodes that were left, one of which pulled the image then,
  // by its digest.
  for (const auto& node : run.nodes()) CHECK(node.node_name() != victim);
  int pulls = 0;
  for (const auto& e : described.events()) {
    if (absl::StartsWith(e.message(), "Pulling image")) ++pulls;
  }
  CHECK(pulls >= 3);

  ShellResult logs = c.Mcli("logs " + name + " --rank 0");
  INFO(logs.output);
  // Resumed from the newest step held whole in the nodes' memory, or from the disk's where that
  // was as new: either way the ranks in their sandboxes read the memory folder.
  std::smatch m;
  REQUIRE(std::regex_search(logs.output, m, std::regex(R"(resumed from step (\d+))")));
  const int resumed = std::stoi(m[1]);
  CHECK(resumed >= 25);
  CHECK(resumed % 5 == 0);
  CHECK(run.progress().resumed_from_step() == resumed);
  const bool from_memory = absl::StrContains(
      logs.output, absl::StrCat("recovered step ", resumed, " from the memory of node"));
  const bool disk_as_new =
      absl::StrContains(logs.output, absl::StrCat("not used: the save folder has step ", resumed));
  CHECK((from_memory || disk_as_new));
  CHECK_FALSE(absl::StrContains(logs.output, "incomplete (said once)"));
  CHECK(absl::StrContains(logs.output, absl::StrCat("training finished: ", steps, " steps")));
}

}  // namespace train_image_e2e_test
}  // namespace tessera::testing
