// tessera-train through the whole platform, as a user runs it: examples/gpt-tiny.yaml submitted
// with mcli to a local cluster (PostgreSQL, tessera-server, tessera-worker daemons), its loss
// falling on real text, its progress in mcli; and a worker killed mid-training, after which the
// requeued run resumes from its newest checkpoint on the remaining nodes.
#include <signal.h>

#include <fstream>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "tests/e2e/training_helpers.h"

namespace tessera::testing {
namespace {

ShellResult Mcli(LocalCluster& c, const std::string& args) { return c.Mcli(args); }

TEST_CASE("examples/gpt-tiny.yaml trains on two nodes and its loss falls", "[e2e]") {
  LocalCluster c;
  const std::string shared = c.marks_dir() + "/shared";
  StartTrainingWorker(c, "node-a", shared);
  StartTrainingWorker(c, "node-b", shared);
  ShellResult submitted = Mcli(c, "run -f " + ExampleWith(c, 150, "gpt-tiny.yaml"));
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  const std::string name(absl::StripAsciiWhitespace(submitted.output));
  v1::Run run = c.client->WaitForStatus(name, v1::RUN_STATUS_COMPLETED, absl::Seconds(240));
  CHECK(run.progress().step() == 150);
  CHECK(run.progress().total_steps() == 150);
  CHECK(run.progress().tokens_per_second() > 0);

  ShellResult logs = Mcli(c, "logs " + name + " --rank 0");
  INFO(logs.output);
  const auto losses = LossesIn(logs.output);
  REQUIRE(losses.count(10));
  REQUIRE(losses.count(150));
  std::printf("gpt-tiny on 2 nodes x 2 ranks: loss %.3f at step 10, %.3f at step 150\n",
              losses.at(10), losses.at(150));
  CHECK(losses.at(150) < losses.at(10) - 0.5);
  CHECK(absl::StrContains(logs.output, "4 ranks on cpu (FULL_SHARD"));
  CHECK(absl::StrContains(logs.output, "training finished: 150 steps"));

  ShellResult described = Mcli(c, "describe run " + name);
  INFO(described.output);
  CHECK(absl::StrContains(described.output, "150/150 (100%), loss "));
  CHECK(absl::StrContains(described.output, "tokens/s, MFU "));
  ShellResult listed = Mcli(c, "get runs");
  CHECK(absl::StrContains(listed.output, "150/150"));
}

TEST_CASE("a node killed mid-training: the run resumes from its checkpoint on the others",
          "[e2e]") {
  LocalCluster c;
  const std::string shared = c.marks_dir() + "/shared";
  StartTrainingWorker(c, "node-a", shared);
  StartTrainingWorker(c, "node-b", shared);
  StartTrainingWorker(c, "node-c", shared);
  // Long enough that the survivors cannot finish it while the dead node's lease runs out.
  ShellResult submitted = Mcli(c, "run -f " + ExampleWith(c, 1000));
  REQUIRE(submitted.exit_code == 0);
  const std::string name(absl::StripAsciiWhitespace(submitted.output));
  const std::string victim = KillANodeAfterACheckpoint(c, name, absl::Seconds(120));
  v1::Run run = c.client->WaitForStatus(name, v1::RUN_STATUS_COMPLETED, absl::Seconds(240));
  CHECK(run.resumption_index() == 1);
  ShellResult described = Mcli(c, "describe run " + name);
  INFO(described.output);
  CHECK(absl::StrContains(described.output, "NODE_FAILURE"));
  ShellResult logs = Mcli(c, "logs " + name + " --rank 0");
  INFO(logs.output);
  const int resumed = ResumedFromStep(logs.output);
  CHECK(run.progress().step() == 1000);
  CHECK(run.progress().resumed_from_step() == resumed);
  // The second attempt ran on the two nodes that were left.
  for (const auto& node : run.nodes()) CHECK(node.node_name() != victim);
}

}  // namespace
}  // namespace tessera::testing
