// tessera-train through the whole platform, as a user runs it: examples/gpt-tiny.yaml submitted
// with mcli to a local cluster (PostgreSQL, tessera-server, tessera-worker daemons), its loss
// falling on real text, its progress in mcli; and a worker killed mid-training, after which the
// requeued run resumes from its newest checkpoint on the remaining nodes, a dense model and a
// mixture of experts (expert-parallel, FULL_SHARD) alike; and a run that accepts fewer nodes
// resuming on the one left, then growing back to two at a checkpoint once the node returns.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/e2e/training_helpers.h"

namespace tessera::testing {
namespace train_e2e_test {

ShellResult Mcli(LocalCluster& c, const std::string& args) { return c.Mcli(args); }

// Replaces `from`, which the YAML file at `path` must hold, with `to`.
void Edit(const std::string& path, const std::string& from, const std::string& to) {
  std::ifstream in(path);
  const std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(absl::StrContains(yaml, from));
  std::ofstream(path) << absl::StrReplaceAll(yaml, {{from, to}});
}

TEST_CASE("examples/gpt-tiny.yaml trains on two nodes and its loss falls", "[e2e]") {
  LocalCluster c;
  StartTrainingWorkers(c, 2);
  ShellResult submitted = Mcli(c, "run -f " + ExampleWith(c, 150, "gpt-tiny.yaml"));
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  const std::string name(absl::StripAsciiWhitespace(submitted.output));
  v1::Run run = WaitForCompletion(c, name, 150);
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

  // The loss curve as the charts draw it: the attempt's reports, in step order, ending at 150.
  ShellResult metrics = Mcli(c, "get metrics " + name + " -o csv");
  INFO(metrics.output);
  REQUIRE(metrics.exit_code == 0);
  const std::vector<std::string> rows =
      absl::StrSplit(absl::StripAsciiWhitespace(metrics.output), '\n');
  REQUIRE(rows.size() >= 3);  // the header and at least two reports
  CHECK(rows[0] == "resumption_index,step,time,loss,learning_rate,tokens_per_second,mfu");
  int64_t previous_step = -1;
  std::vector<double> curve;
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::vector<std::string> cells = absl::StrSplit(rows[i], ',');
    REQUIRE(cells.size() == 7);
    CHECK(cells[0] == "0");
    int64_t step = 0;
    double loss = 0;
    REQUIRE(absl::SimpleAtoi(cells[1], &step));
    REQUIRE(absl::SimpleAtod(cells[3], &loss));
    CHECK(step > previous_step);
    previous_step = step;
    curve.push_back(loss);
  }
  CHECK(previous_step == 150);
  CHECK(curve.back() < curve.front());
}

TEST_CASE("a NaN loss rolled back is a run event in mcli describe, and the run completes",
          "[e2e]") {
  LocalCluster c;
  StartTrainingWorkers(c, 2);
  // The example, 40 steps, rolled back on a NaN; the batch of step 30 poisoned (the engine's
  // test hook), one checkpoint (step 25) before it.
  const std::string path = ExampleWith(c, 40, "rollback.yaml");
  std::ofstream(path, std::ios::app) << "  loss_rollback:\n    on_nan: true\n"
                                     << "env_variables:\n  TESSERA_DEBUG_NAN_AT_STEP: \"30\"\n";
  ShellResult submitted = Mcli(c, "run -f " + path);
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  const std::string name(absl::StripAsciiWhitespace(submitted.output));
  const v1::Run run = WaitForCompletion(c, name, 40);
  CHECK(run.resumption_index() == 0);  // rolled back within its attempt
  CHECK(run.progress().loss_rollbacks() == 1);
  CHECK(run.progress().last_loss_rollback().bad_step() == 30);
  CHECK(run.progress().last_loss_rollback().checkpoint_step() == 25);

  ShellResult described = Mcli(c, "describe run " + name);
  INFO(described.output);
  CHECK(absl::StrContains(described.output, "LOSS_ROLLBACK"));
  CHECK(absl::StrContains(described.output,
                          "Loss rollback 1 of 3: the loss is nan at step 30; training went back "
                          "to the checkpoint of step 25 and skips that step's batch"));
  CHECK(absl::StrContains(described.output, "40/40 (100%)"));
  ShellResult logs = Mcli(c, "logs " + name + " --rank 0");
  INFO(logs.output);
  CHECK(absl::StrContains(logs.output, "training finished: 40 steps"));
}

// A run of `example` (`steps` long) on 2 of 3 nodes, one of them killed once a checkpoint is
// committed, through the node's detection and the requeue to its end on the two left: its
// name, the finished run, rank 0's logs and the step it resumed from.
struct KilledAndResumed {
  std::string name;
  v1::Run run;
  std::string logs;
  int resumed = 0;
};

KilledAndResumed KillANodeAndFinish(LocalCluster& c, const std::string& example, int steps) {
  ShellResult submitted = Mcli(c, "run -f " + example);
  REQUIRE(submitted.exit_code == 0);
  KilledAndResumed out;
  out.name = std::string(absl::StripAsciiWhitespace(submitted.output));
  const std::string victim = KillANodeAfterACheckpoint(c, out.name);
  out.run = WaitForCompletion(c, out.name, steps);
  CHECK(out.run.resumption_index() == 1);
  ShellResult described = Mcli(c, "describe run " + out.name);
  INFO(described.output);
  CHECK(absl::StrContains(described.output, "NODE_FAILURE"));
  out.logs = Mcli(c, "logs " + out.name + " --rank 0").output;
  INFO(out.logs);
  out.resumed = ResumedFromStep(out.logs);
  CHECK(out.run.progress().step() == steps);
  CHECK(out.run.progress().resumed_from_step() == out.resumed);
  // The second attempt ran on the two nodes that were left.
  for (const auto& node : out.run.nodes()) CHECK(node.node_name() != victim);
  return out;
}

TEST_CASE("a node killed mid-training: the run resumes from its checkpoint on the others",
          "[e2e]") {
  LocalCluster c(AttemptCountingFlags());
  StartTrainingWorkers(c, 3);
  const int steps = KillableRunSteps();
  const KilledAndResumed killed = KillANodeAndFinish(c, ExampleWith(c, steps), steps);
  const std::string& name = killed.name;
  const int resumed = killed.resumed;

  // The history shows both attempts, the resumption with its cause, and the second attempt's
  // reports from after its checkpoint on.
  ShellResult metrics = Mcli(c, "get metrics " + name + " -o json");
  INFO(metrics.output);
  REQUIRE(metrics.exit_code == 0);
  const auto history = nlohmann::json::parse(metrics.output);
  REQUIRE(history["attempts"].size() == 2);
  CHECK(history["attempts"][0]["end_reason"] == "ATTEMPT_END_REASON_NODE_FAILURE");
  CHECK(history["attempts"][1]["resumed_from_step"] == std::to_string(resumed));
  int64_t first_of_second = -1, last_of_second = -1, points_of_first = 0;
  for (const auto& point : history["points"]) {
    const int64_t step = std::stoll(point["step"].get<std::string>());
    if (point["resumption_index"] == 0) {
      ++points_of_first;
      continue;
    }
    if (first_of_second < 0) first_of_second = step;
    last_of_second = step;
  }
  CHECK(points_of_first > 0);
  CHECK(first_of_second >= resumed);
  CHECK(last_of_second == steps);
  ShellResult table = Mcli(c, "get metrics " + name);
  INFO(table.output);
  CHECK(absl::StrContains(table.output, "attempt 1 resumed from step " + std::to_string(resumed)));
  CHECK(absl::StrContains(table.output, "attempt 0 ended: NODE_FAILURE"));
}

TEST_CASE(
    "in-memory checkpoints: a node killed between disk checkpoints, the run resumes from a step "
    "its buddy node still holds in memory, and its losses equal the undisturbed run's",
    "[e2e]") {
  LocalCluster c(AttemptCountingFlags());
  StartTrainingWorkers(c, 3);
  // The baseline's length and schedule, a snapshot in memory every 4 steps and no disk
  // checkpoint before the end: whatever the run resumes from came from the nodes' memory.
  const TrainingBaseline& baseline = Baseline();
  const std::string example = ExampleWith(c, baseline.steps, "memory.yaml");
  Edit(example, "  save_interval: 25ba\n",
       "  save_interval: 100000ba\n  memory_checkpoint_interval: 4ba\n");
  ShellResult submitted = Mcli(c, "run -f " + example);
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  const std::string name(absl::StripAsciiWhitespace(submitted.output));
  const v1::Run running = WaitForStep(c, name, 40);
  REQUIRE(running.nodes_size() == 2);
  const std::string survivor = running.nodes(0).node_name(), victim = running.nodes(1).node_name();

  // Once the survivor's memory holds a step from 44 on whole (its 2 shards and the victim's 2
  // copies), the victim is killed with everything it held.
  const std::string memory = absl::StrCat(c.worker(survivor).state_dir, "-memory/", running.id());
  auto whole = [&] {
    std::error_code ec;
    for (const auto& step : std::filesystem::directory_iterator(memory, ec)) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(absl::StripPrefix(step.path().filename().string(), "step-"), &n) ||
          n < 44) {
        continue;
      }
      int described = 0;
      std::error_code inner;
      for (const auto& e : std::filesystem::directory_iterator(step.path(), inner)) {
        described += absl::EndsWith(e.path().string(), ".bin.json") ? 1 : 0;
      }
      if (described == 4) return true;
    }
    return false;
  };
  for (int i = 0; i < 600 && !whole(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(whole());
  const int64_t at_kill = c.client->Get(name).progress().step();
  REQUIRE(c.worker(victim).process->Kill(SIGKILL).ok());

  const v1::Run run = WaitForCompletion(c, name, baseline.steps);
  CHECK(run.resumption_index() == 1);
  for (const auto& node : run.nodes()) CHECK(node.node_name() != victim);
  const std::string logs = Rank0LogThrough(c, name, baseline.steps);
  INFO(logs);
  std::smatch m;
  REQUIRE(
      std::regex_search(logs, m, std::regex(R"(recovered step (\d+) from the memory of node)")));
  const int recovered = std::stoi(m[1]);
  CHECK(recovered >= 44);
  CHECK(recovered % 4 == 0);
  CHECK(recovered >= at_kill - at_kill % 4);
  CHECK(absl::StrContains(logs, absl::StrCat("resumed from step ", recovered)));
  CHECK(run.progress().resumed_from_step() == recovered);
  // The steps trained again: from the snapshot to the last step reported before the kill, at
  // most a snapshot interval (two, where the kill came during a snapshot).
  const ShellResult described = Mcli(c, "describe run " + name + " -o json");
  REQUIRE(described.exit_code == 0);
  const auto description = nlohmann::json::parse(described.output);
  REQUIRE(description["interruptions"].size() == 1);
  const auto& lost = description["interruptions"][0];
  const int64_t rework = std::stoll(lost.value("rework_steps", std::string("0")));
  CHECK(rework <= 8);
  std::printf(
      "in-memory checkpoints: killed at step %lld or later, resumed from step %d: %lld steps "
      "trained again; detection %.1f s, downtime %.1f s, restart %.1f s\n",
      static_cast<long long>(at_kill), recovered, static_cast<long long>(rework),
      lost.value("detection_seconds", 0.0), lost.value("downtime_seconds", 0.0),
      lost.value("restart_seconds", 0.0));
  // The first attempt's losses up to the kill, the second's from its resumption on: together,
  // the undisturbed run's, and where both trained a step (recomputed), both equal it.
  const ShellResult first = Mcli(c, "logs " + name + " --rank 0 --resumption 0");
  REQUIRE(first.exit_code == 0);
  std::map<int, double> losses = LossesIn(first.output);
  for (const auto& [step, loss] : losses) {
    INFO("attempt 0, step " << step);
    CHECK(loss == Approx(baseline.losses.at(step)).epsilon(1e-6));
  }
  for (const auto& [step, loss] : LossesIn(logs)) losses[step] = loss;
  CheckLossesEqualBaseline(losses, baseline);
}

TEST_CASE(
    "a mixture of experts under FULL_SHARD, expert-parallel across each node's ranks: a node "
    "killed mid-training, the run resumes from its checkpoint on the others",
    "[e2e]") {
  LocalCluster c(AttemptCountingFlags());
  StartTrainingWorkers(c, 3);
  const int steps = KillableRunSteps();
  const std::string example = ExampleWith(c, steps, "moe.yaml");
  Edit(example, "    preset: tiny\n", "    preset: moe-tiny\n    moe_world_size: 2\n");
  const KilledAndResumed killed = KillANodeAndFinish(c, example, steps);
  INFO(killed.logs);
  CHECK(absl::StrContains(killed.logs, "every block's MLP is 8 experts, each token routed to 2"));
  CHECK(absl::StrContains(killed.logs, "expert-parallel over groups of 2 ranks, 4 experts each"));
  CHECK(absl::StrContains(killed.logs, "FULL_SHARD"));
  CHECK(killed.resumed > 0);
  CHECK(absl::StrContains(killed.logs, "mixture of experts at the last step"));
}

TEST_CASE(
    "a run that accepts one node of its two: a node killed, it resumes on the one left, then grows "
    "back to both right after a checkpoint once the node returns",
    "[e2e]") {
  LocalCluster c(AttemptCountingFlags({"--shrink-after-seconds", "3"}));
  StartTrainingWorkers(c, 2);
  const std::string shared = c.marks_dir() + "/shared";
  // Long enough to pass the kill (step 40), the shrunk attempt's checkpoint and the grown one's.
  const int steps = KillableRunSteps() + 100;
  const std::string example = ExampleWith(c, steps, "shrink.yaml");
  Edit(example, "  nodes: 2\n", "  nodes: 2\n  min_nodes: 1\n");
  ShellResult submitted = Mcli(c, "run -f " + example);
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  const std::string name(absl::StripAsciiWhitespace(submitted.output));
  const std::string victim = KillANodeAfterACheckpoint(c, name);
  const absl::Time killed = absl::Now();

  // Lost, requeued, and after 3 s without another node, resumed on the one left.
  WaitForShrunk(c, name, victim, killed);

  // The node returns: the run grows back at its next checkpoint and finishes on both.
  StartTrainingWorker(c, victim, shared);
  const v1::Run run = WaitForCompletion(c, name, steps);
  ShellResult described = Mcli(c, "describe run " + name);
  INFO(described.output);
  ShellResult metrics = Mcli(c, "get metrics " + name + " -o json");
  REQUIRE(metrics.exit_code == 0);
  const auto history = nlohmann::json::parse(metrics.output);
  // Printed before the checks: a CI log cut after a failure's first lines still shows why.
  for (const auto& attempt : history["attempts"]) {
    std::printf("%s: attempt ended %s\n", name.c_str(),
                attempt.value("end_reason", std::string("(running)")).c_str());
  }
  CHECK(run.resumption_index() == 2);
  CHECK(run.retries_used() == 1);  // the node failure's; shrinking and growing use none
  CHECK(run.nodes_size() == 2);
  CHECK(absl::StrContains(described.output,
                          "Resumed on 1 of its 2 nodes (compute.min_nodes is 1): not all of them "
                          "came free within 3s of its requeue"));
  CHECK(absl::StrContains(described.output,
                          "Run was stopped to resize: all 2 of its nodes are free again; stopped "
                          "right after its checkpoint of step "));
  REQUIRE(history["attempts"].size() == 3);
  CHECK(history["attempts"][0]["end_reason"] == "ATTEMPT_END_REASON_NODE_FAILURE");
  CHECK(history["attempts"][1]["end_reason"] == "ATTEMPT_END_REASON_RESIZED");
  // Each resumption starts from a committed checkpoint (every 25 steps); the grown one from the
  // checkpoint the stop waited for (the shrunk attempt's own, or the one it resumed from when
  // the node came back before it reported a newer one), or from a newer one committed while the
  // stop was on its way, never an older one: only the steps after it are trained again.
  const int64_t first = std::stoll(history["attempts"][1]["resumed_from_step"].get<std::string>());
  const int64_t second = std::stoll(history["attempts"][2]["resumed_from_step"].get<std::string>());
  CHECK(first % 25 == 0);
  CHECK(second % 25 == 0);
  CHECK(second >= first);
  std::smatch waited;
  REQUIRE(std::regex_search(described.output, waited,
                            std::regex(R"(checkpoint of step (\d+) to resume on all of them)")));
  const int64_t waited_for = std::stoll(waited[1]);
  std::printf("grow: stopped after the checkpoint of step %lld, resumed from step %lld\n",
              static_cast<long long>(waited_for), static_cast<long long>(second));
  CHECK(second >= waited_for);
  // Rank 0's log says the world each attempt trained in, the global batch the same in both.
  const std::string on_one = Mcli(c, "logs " + name + " --rank 0 --resumption 1").output;
  const std::string on_two = Mcli(c, "logs " + name + " --rank 0 --resumption 2").output;
  INFO(on_one);
  INFO(on_two);
  CHECK(absl::StrContains(on_one, "2 ranks on cpu (FULL_SHARD"));
  CHECK(absl::StrContains(on_two, "4 ranks on cpu (FULL_SHARD"));
  CHECK(absl::StrContains(on_one, "global batch 16,"));
  CHECK(absl::StrContains(on_two, "global batch 16,"));
}

}  // namespace train_e2e_test
}  // namespace tessera::testing
