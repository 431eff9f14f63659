// Faults of Tessera itself under a real 2-node tessera-train run (PostgreSQL, tessera-server,
// tessera-worker daemons, real ranks): none may cost the run an interruption, a step or a line.
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/e2e/training_helpers.h"

namespace tessera::testing {
namespace {

// Long enough (about 28 steps a second here) to train through the whole outage.
constexpr int kSteps = 1500;

// Submits the example at kSteps steps and returns the run's name.
std::string SubmitTraining(LocalCluster& c, const std::string& file) {
  ShellResult submitted = c.Mcli("run -f " + ExampleWith(c, kSteps, file));
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  return std::string(absl::StripAsciiWhitespace(submitted.output));
}

// Rank 0's stored log, once it holds the last step's line (the shippers catch up after an
// outage: lines are acknowledged only once stored).
std::string Rank0LogThrough(LocalCluster& c, const std::string& name, int step) {
  const std::string last = absl::StrCat("step ", step, "/", step, ": loss");
  ShellResult logs;
  for (int i = 0; i < 600; ++i) {
    logs = c.Mcli("logs " + name + " --rank 0");
    if (absl::StrContains(logs.output, last)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(logs.output);
  REQUIRE(absl::StrContains(logs.output, last));
  return logs.output;
}

// Waits until the run has reached `step`.
v1::Run WaitForStep(LocalCluster& c, const std::string& name, int step) {
  v1::Run run = c.client->WaitForStatus(name, v1::RUN_STATUS_RUNNING, absl::Seconds(90));
  for (int i = 0; i < 1200 && run.progress().step() < step; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    run = c.client->Get(name);
  }
  REQUIRE(run.progress().step() >= step);
  return run;
}

TEST_CASE("PostgreSQL stopped for 30 s under a 2-node run costs it nothing", "[e2e]") {
  LocalCluster c;
  const std::string shared = c.marks_dir() + "/shared";
  StartTrainingWorker(c, "node-a", shared);
  StartTrainingWorker(c, "node-b", shared);

  const std::string name = SubmitTraining(c, "disturbed.yaml");
  const v1::Run before = WaitForStep(c, name, 20);
  REQUIRE(before.resumption_index() == 0);
  REQUIRE(before.progress().step() < kSteps / 3);
  REQUIRE(c.pg->Stop().ok());
  const absl::Time stopped = absl::Now();
  // The ranks train on; the workers' heartbeats are answered from the leader's memory.
  std::this_thread::sleep_for(std::chrono::seconds(30));
  REQUIRE(c.pg->Resume().ok());
  // Still training when the database came back: the outage was under the run, not after it.
  CHECK(c.client->Get(name).status() == v1::RUN_STATUS_RUNNING);
  std::printf("PostgreSQL was away for %.1f s\n", absl::ToDoubleSeconds(absl::Now() - stopped));

  const v1::Run done = c.client->WaitForStatus(name, v1::RUN_STATUS_COMPLETED, absl::Seconds(300));
  CHECK(done.resumption_index() == 0);  // not one interruption
  CHECK(done.retries_used() == 0);
  CHECK(done.control_plane_interruptions() == 0);
  CHECK(done.progress().step() == kSteps);
  CHECK(c.Node("node-a").liveness() == v1::NODE_LIVENESS_ONLINE);
  CHECK(c.Node("node-b").liveness() == v1::NODE_LIVENESS_ONLINE);
  ShellResult events = c.Mcli("get events");
  INFO(events.output);
  REQUIRE(events.exit_code == 0);
  CHECK(absl::StrContains(events.output, "REGISTERED"));
  CHECK_FALSE(absl::StrContains(events.output, "LOST"));

  // Every line the ranks printed was stored once, across the outage: each tenth step's loss.
  const auto disturbed = LossesIn(Rank0LogThrough(c, name, kSteps));
  for (int step = 10; step <= kSteps; step += 10) {
    INFO("step " << step);
    CHECK(disturbed.count(step) == 1);
  }

  // The same config undisturbed: the same losses, step for step.
  const std::string baseline = SubmitTraining(c, "baseline.yaml");
  c.client->WaitForStatus(baseline, v1::RUN_STATUS_COMPLETED, absl::Seconds(300));
  const auto undisturbed = LossesIn(Rank0LogThrough(c, baseline, kSteps));
  REQUIRE(undisturbed.size() == disturbed.size());
  for (const auto& [step, loss] : undisturbed) {
    INFO("step " << step);
    CHECK(disturbed.at(step) == Approx(loss).epsilon(1e-6));
  }
}

}  // namespace
}  // namespace tessera::testing
