// bench_goodput: goodput under chaos (issue 11's benchmark).
//
// A local cluster (4 workers of 2 simulated GPUs, the split control plane with a standby
// scheduler, real PostgreSQL) trains the example GPT with tessera-train on 2 nodes twice:
//   1. undisturbed: the bound. Its steps per second are the rate every cost is counted in.
//   2. under chaos: every 30-60 s (seeded) one fault, each kind once per round in a shuffled
//      order: xid, crash, hang, slow, netdrop on a node of the run; SIGKILL of the scheduler
//      leader, the run manager, the log service; SIGSTOP of the leader for 20 s; a PostgreSQL
//      restart.
// Faults stop when the run completes. A fault's cost is the training time its window (from it to
// the next fault, or to the end) lost against the undisturbed rate: window length - steps gained /
// rate. It covers detection, restart and recomputed steps alike. The same cost over the undisturbed
// run's windows is the noise floor. Prints a row per fault, a table per kind, goodput (steps / rate
// over wall time) and the largest difference between the two runs' losses.
//
//   bench_goodput [--steps N] [--rounds R] [--seed S] [--min-gap S] [--max-gap S] [--kinds a,b]
//                 [--loss-seconds S]   (the schedulers' loss lease; 0: their 10 s lease)
//                 [--save-interval N] [--memory-checkpoint-interval N]   (the run's, in steps;
//                 25 and 0, none, as the example)
//                 [--move-off-stragglers true|false]   (the run's; true)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "bench/goodput/chaos.h"
#include "bench/goodput/progress_trace.h"
#include "bench/goodput/split_cluster.h"

namespace tessera::bench {
namespace {

struct Options {
  // About 10 minutes of training on the 2-core development machine (36 steps/s).
  int steps = 21000;
  int rounds = 2;
  uint32_t seed = 1;
  double min_gap = 30, max_gap = 60;
  SplitClusterOptions cluster;  // --loss-seconds; its defaults otherwise
  std::vector<std::string> kinds = AllFaultKinds();
  int save_interval = 25;              // the example's
  int memory_checkpoint_interval = 0;  // 0: none, as the example
};

// The example GPT with `steps` steps, hang detection and retries for a long chaos schedule, and
// the options' checkpoint intervals.
std::string WriteConfig(const std::string& dir, const Options& o, const std::string& name) {
  const int steps = o.steps;
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/examples/gpt-tiny.yaml");
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  yaml = absl::StrReplaceAll(yaml,
                             {{"name: gpt-tiny", "name: " + name},
                              // its workers run ranks on the host (--sandbox off)
                              {"\nimage: tessera/train:latest\n", "\nimage: host\n"},
                              {"max_duration: 150ba", absl::StrCat("max_duration: ", steps, "ba")},
                              {"  max_retries: 5", "  max_retries: 100\n  hang_timeout: 8"},
                              {"  save_interval: 25ba\n",
                               absl::StrCat("  save_interval: ", o.save_interval, "ba\n",
                                            o.memory_checkpoint_interval > 0
                                                ? absl::StrCat("  memory_checkpoint_interval: ",
                                                               o.memory_checkpoint_interval, "ba\n")
                                                : "")}});
  const std::string path = dir + "/" + name + ".yaml";
  std::ofstream(path) << yaml;
  return path;
}

absl::StatusOr<std::string> Submit(SplitCluster& c, const std::string& config) {
  auto out = c.Mcli("run -f " + config);
  if (!out.ok()) return out.status();
  return std::string(absl::StripAsciiWhitespace(*out));
}

// Rank 0's output in attempt `resumption`.
std::string Rank0Output(SplitCluster& c, const std::string& run, int resumption) {
  std::string text;
  v1::GetLogsRequest req;
  req.set_run_name(run);
  req.set_rank(0);
  req.set_resumption_index(resumption);
  auto ctx = c.Ctx(absl::Seconds(30));
  auto reader = c.logs->GetLogs(ctx.get(), req);
  v1::LogLine line;
  while (reader->Read(&line)) text += line.text();
  (void)reader->Finish();
  return text;
}

// Rank 0's losses by step ("step 10/150: loss 6.123456") over every attempt, the last printed
// for each step (a step computed again after a resumption is printed again).
std::map<int, double> Losses(SplitCluster& c, const std::string& run, int steps, int attempts) {
  const std::string last = absl::StrCat("step ", steps, "/", steps, ": loss");
  std::string text;
  for (int i = 0; i < 300 && text.find(last) == std::string::npos; ++i) {
    if (i > 0) absl::SleepFor(absl::Milliseconds(200));
    text.clear();
    for (int r = 0; r < attempts; ++r) text += Rank0Output(c, run, r);
  }
  std::map<int, double> losses;
  static const std::regex kLine(R"(step (\d+)/\d+: loss ([0-9.]+))");
  for (std::sregex_iterator it(text.begin(), text.end(), kLine), end; it != end; ++it) {
    losses[std::stoi((*it)[1])] = std::stod((*it)[2]);
  }
  return losses;
}

int Main(const Options& o) {
  const std::string root = absl::StrCat("/tmp/bench-goodput-", getpid());
  std::filesystem::create_directories(root);
  std::printf(
      "bench_goodput: %d steps, %d round(s) of %zu fault kinds, seed %u, gaps %.0f-%.0f s\n",
      o.steps, o.rounds, o.kinds.size(), o.seed, o.min_gap, o.max_gap);
  std::printf("process logs in %s\n", root.c_str());
  SplitClusterOptions cluster = o.cluster;
  cluster.root = root;
  auto started = SplitCluster::Start(cluster);
  if (!started.ok()) {
    std::fprintf(stderr, "cluster: %s\n", started.status().ToString().c_str());
    return 1;
  }
  SplitCluster& c = **started;

  // 1. Undisturbed.
  auto baseline = Submit(c, WriteConfig(root, o, "undisturbed"));
  if (!baseline.ok()) {
    std::fprintf(stderr, "%s\n", baseline.status().ToString().c_str());
    return 1;
  }
  ProgressTrace calm(c, *baseline);
  if (auto st = calm.WaitForEnd(absl::Hours(2)); !st.ok()) {
    std::fprintf(stderr, "undisturbed run: %s\n", st.ToString().c_str());
    return 1;
  }
  const double rate = calm.StepsPerSecond();
  std::printf("undisturbed: %d steps in %.1f s of training: %.2f steps/s\n", o.steps,
              calm.TrainingSeconds(), rate);

  // 2. Under chaos.
  std::mt19937 rng(o.seed);
  std::vector<std::string> schedule;
  for (int r = 0; r < o.rounds; ++r) {
    std::vector<std::string> round = o.kinds;
    std::shuffle(round.begin(), round.end(), rng);
    schedule.insert(schedule.end(), round.begin(), round.end());
  }
  std::uniform_real_distribution<double> gap(o.min_gap, o.max_gap);
  auto disturbed = Submit(c, WriteConfig(root, o, "chaos"));
  if (!disturbed.ok()) {
    std::fprintf(stderr, "%s\n", disturbed.status().ToString().c_str());
    return 1;
  }
  ProgressTrace trace(c, *disturbed);
  Chaos chaos(c);
  std::vector<FaultWindow> faults;
  // The first fault comes once the run trains (after its first checkpoint).
  trace.WaitForStep(30, absl::Minutes(10));
  for (const std::string& kind : schedule) {
    const absl::Time due = absl::Now() + absl::Seconds(gap(rng));
    while (absl::Now() < due && !trace.Finished()) {
      for (const auto& f : chaos.RunRepairs(false)) std::fprintf(stderr, "repair: %s\n", f.c_str());
      chaos.RepairNodes(trace.Latest().nodes);
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (trace.Finished()) break;
    for (const auto& f : chaos.RunRepairs(true)) std::fprintf(stderr, "repair: %s\n", f.c_str());
    // A node fault goes to a node the run trains on: wait until an attempt trains again.
    for (const absl::Time limit = absl::Now() + absl::Seconds(90);
         IsNodeFault(kind) && !trace.Finished() && absl::Now() < limit &&
         !(trace.Latest().status == v1::RUN_STATUS_RUNNING && !trace.Latest().nodes.empty() &&
           trace.AdvancedWithin(absl::Seconds(1)));) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    const ProgressSample before = trace.Latest();
    chaos.RepairNodes(before.status == v1::RUN_STATUS_RUNNING ? before.nodes
                                                              : std::vector<std::string>{});
    const absl::Time at = absl::Now();
    auto injected = chaos.Inject(kind, before.nodes, rng());
    if (!injected.ok()) {
      std::fprintf(stderr, "inject %s: %s\n", kind.c_str(), injected.status().ToString().c_str());
      continue;
    }
    std::printf("%7.1f s  step %5lld  %-11s %s\n", absl::ToDoubleSeconds(at - trace.start()),
                static_cast<long long>(before.step), kind.c_str(), injected->target.c_str());
    std::fflush(stdout);
    faults.push_back({kind, injected->target, at});
  }
  for (const auto& f : chaos.RunRepairs(true)) std::fprintf(stderr, "repair: %s\n", f.c_str());
  if (auto st = trace.WaitForEnd(absl::Hours(2)); !st.ok()) {
    std::fprintf(stderr, "run under chaos: %s\n", st.ToString().c_str());
    return 1;
  }
  chaos.RepairNodes({});

  const Report report = Summarize(calm, trace, faults, rate, o.min_gap, o.max_gap);
  PrintReport(report);
  PrintRunRecord(c, *disturbed);

  // 3. The loss curve.
  const auto calm_losses = Losses(c, *baseline, o.steps, calm.Latest().resumption + 1);
  const auto chaos_losses = Losses(c, *disturbed, o.steps, trace.Latest().resumption + 1);
  double worst = 0;
  int compared = 0, missing = 0;
  for (const auto& [step, loss] : calm_losses) {
    auto it = chaos_losses.find(step);
    if (it == chaos_losses.end()) {
      ++missing;
      continue;
    }
    ++compared;
    worst = std::max(worst, std::fabs(it->second - loss) / std::max(1e-12, std::fabs(loss)));
  }
  const bool match = compared > 0 && missing == 0 && worst <= 1e-5;
  std::printf(
      "loss curve: %d logged steps compared, %d missing, largest relative difference %.2e"
      " -> %s\n",
      compared, missing, worst, match ? "matches" : "DIFFERS");
  std::filesystem::remove_all(c.shared_dir());
  return match && trace.Completed() ? 0 : 2;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines as they happen, even into a file
  tessera::bench::Options o;
  CLI::App app{"bench_goodput: goodput under chaos"};
  app.add_option("--steps", o.steps, "steps of each run")->capture_default_str();
  app.add_option("--rounds", o.rounds, "rounds of faults, each kind once a round")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "of the faults' order and gaps")->capture_default_str();
  app.add_option("--min-gap", o.min_gap, "seconds from one fault to the next, at least")
      ->capture_default_str();
  app.add_option("--max-gap", o.max_gap, "seconds from one fault to the next, at most")
      ->capture_default_str();
  app.add_option("--kinds", o.kinds, "the fault kinds injected, comma-separated (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(tessera::bench::AllFaultKinds()));
  app.add_option("--loss-seconds", o.cluster.loss_seconds,
                 "the schedulers' loss lease (0: their 10 s lease)")
      ->capture_default_str();
  app.add_option("--save-interval", o.save_interval, "the run's checkpoint interval, in steps")
      ->capture_default_str();
  app.add_option("--memory-checkpoint-interval", o.memory_checkpoint_interval,
                 "the run's in-memory checkpoint interval, in steps (0: none)")
      ->capture_default_str();
  app.add_option("--move-off-stragglers", o.cluster.move_off_stragglers,
                 "tessera-health's flag of that name (default: true)")
      ->check(CLI::IsMember({"true", "false"}));
  CLI11_PARSE(app, argc, argv);
  // Exit 64 for a bad value, as before: 2 is Main's, for loss curves that differ.
  const auto bad_value = [](const char* what) {
    std::fprintf(stderr, "bench_goodput: %s\n", what);
    return 64;
  };
  const double loss = o.cluster.loss_seconds;
  if (o.steps < 100) return bad_value("need --steps >= 100");
  if (o.rounds < 1) return bad_value("need --rounds >= 1");
  if (o.min_gap < 5) return bad_value("need --min-gap >= 5");
  if (o.max_gap < o.min_gap) return bad_value("need --max-gap >= --min-gap");
  if (loss != 0 && (loss <= 1 || loss > 10))
    return bad_value("need --loss-seconds 0 or in (1, 10]");
  if (o.save_interval < 1) return bad_value("need --save-interval >= 1");
  if (o.memory_checkpoint_interval < 0) return bad_value("need --memory-checkpoint-interval >= 0");
  return tessera::bench::Main(o);
}
