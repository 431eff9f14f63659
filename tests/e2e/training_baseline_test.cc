// The fixture of the training fault suites (CTest FIXTURES_SETUP training_baseline): how fast the
// example trains on 2 nodes x 2 ranks on this machine, and an undisturbed run of it, as long as
// the suites' longest fault needs at that rate, whose losses every fault case compares with. One
// baseline for all of them instead of one per case; sized by the rate, so that a slower machine
// trains fewer steps in the same time instead of the same steps in more time.
#include <filesystem>

#include "absl/strings/strip.h"
#include "tests/e2e/training_helpers.h"

namespace tessera::testing {
namespace training_baseline_test {

std::string Submit(LocalCluster& c, int steps, const std::string& file) {
  ShellResult submitted = c.Mcli("run -f " + ExampleWith(c, steps, file));
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  return std::string(absl::StripAsciiWhitespace(submitted.output));
}

// Steps per second of the running `name`, from one progress report to a later one at least
// `over` apart (reports come every 10 steps: timing report to report leaves no rounding).
double MeasureRate(LocalCluster& c, const std::string& name, absl::Duration over) {
  // Past the first steps, which pay for the ranks' warm-up.
  int64_t from = WaitForStep(c, name, 20).progress().step();
  // Waits for the next report after `step`; returns its step and when it was seen.
  auto next_report = [&](int64_t step) {
    const absl::Time deadline = absl::Now() + kStallLimit;
    v1::Run run = c.client->Get(name);
    while (run.progress().step() == step && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      run = c.client->Get(name);
    }
    INFO(RunReport(*c.client, run, {}));
    REQUIRE(run.status() == v1::RUN_STATUS_RUNNING);
    REQUIRE(run.progress().step() > step);
    return std::make_pair(run.progress().step(), absl::Now());
  };
  auto [first, t0] = next_report(from);
  auto [last, t1] = next_report(first);
  while (t1 - t0 < over) std::tie(last, t1) = next_report(last);
  return static_cast<double>(last - first) / absl::ToDoubleSeconds(t1 - t0);
}

TEST_CASE("An undisturbed 2-node gpt-tiny run: the rate and losses the fault suites compare with",
          "[e2e]") {
  const std::string file = TESSERA_TRAINING_BASELINE;
  std::filesystem::create_directories(std::filesystem::path(file).parent_path());
  std::filesystem::remove(file);  // a failed fixture leaves none behind for the cases to read

  LocalCluster c;
  StartTrainingWorkers(c, 2);

  // 1. The rate, over 8 s of a run too long to finish, then stopped.
  const std::string probe = Submit(c, 1000000, "rate.yaml");
  TrainingBaseline baseline;
  baseline.steps_per_second = MeasureRate(c, probe, absl::Seconds(8));
  REQUIRE(c.Mcli("stop run " + probe).exit_code == 0);
  c.client->WaitForStatus(probe, v1::RUN_STATUS_STOPPED, kStallLimit);

  // 2. The baseline: kBaselineTraining at that rate, in whole 50s of steps (every tenth step's
  // loss is compared), and at least 200 (past several checkpoints).
  baseline.steps = std::max(200, baseline.StepsIn(kBaselineTraining) / 50 * 50);
  std::printf("gpt-tiny trains at %.1f steps/s on 2 nodes x 2 ranks here: baseline of %d steps\n",
              baseline.steps_per_second, baseline.steps);
  const std::string name = Submit(c, baseline.steps, "baseline.yaml");
  const v1::Run done = WaitForCompletion(c, name, baseline.steps);
  REQUIRE(done.resumption_index() == 0);
  baseline.losses = LossesIn(Rank0LogThrough(c, name, baseline.steps));
  REQUIRE(baseline.losses.size() == static_cast<size_t>(baseline.steps / 10));
  REQUIRE(baseline.Write(file));
}

}  // namespace training_baseline_test
}  // namespace tessera::testing
