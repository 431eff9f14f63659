#pragma once
// What the end-to-end tests of tessera-train share: workers whose ranks find tessera-train and a
// shared folder, the example config with another length, and the losses rank 0 printed.

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/support/local_cluster.h"

namespace tessera::testing {

// A worker whose ranks find tessera-train and share a folder with the other nodes.
inline void StartTrainingWorker(LocalCluster& c, const std::string& name, const std::string& shared,
                                const std::string& scheduler_endpoint = "",
                                const std::vector<std::string>& env = {}) {
  c.StartWorker(name, 2, TrainingRankEnv(shared), scheduler_endpoint, env);
}

// `count` such workers, node-a, node-b, ..., sharing the cluster's folder `shared`.
inline void StartTrainingWorkers(LocalCluster& c, int count) {
  const std::string shared = c.marks_dir() + "/shared";
  for (int i = 0; i < count; ++i) {
    StartTrainingWorker(c, absl::StrCat("node-", std::string(1, static_cast<char>('a' + i))),
                        shared);
  }
}

// Server flags for a cluster whose test counts its run's attempts, the test's own `flags` first.
// The nodes share this machine's two cores with each other and with CI's other tests, so a node
// whose ranks are descheduled for seconds looks like a straggler, and moving its run off it (what
// the health API does by default when the run has somewhere to go: an idle node, or min_nodes)
// adds an attempt the test did not cause. The straggler watch still starts its sweep, which
// clears a healthy node; health_e2e_test covers the move.
inline std::vector<std::string> AttemptCountingFlags(std::vector<std::string> flags = {}) {
  flags.insert(flags.end(), {"--move-off-stragglers", "false"});
  return flags;
}

// How long a training run may go without a new step before a wait gives up on it. The waits
// below have no budget for the whole run: a slower machine trains longer, not worse, so what
// fails a test is a run that stops moving. Progress reports come every 10 steps (under 2 s on the
// slowest machine seen) and wait out a control-plane fault of up to 30 s; this is twice that.
inline constexpr absl::Duration kStallLimit = absl::Seconds(60);

inline bool Ended(const v1::Run& r) {
  return r.status() == v1::RUN_STATUS_COMPLETED || r.status() == v1::RUN_STATUS_FAILED ||
         r.status() == v1::RUN_STATUS_STOPPED;
}

// Where the run stands, with its attempts and events and what `diagnostics` adds (rank 0's log).
inline std::string RunReport(Client& client, const v1::Run& run,
                             const std::function<std::string()>& diagnostics) {
  const v1::RunDescription d = client.Describe(run.name());
  std::string attempts;
  for (const auto& a : d.attempts()) attempts += a.DebugString() + "\n";
  std::string events;
  for (const auto& e : d.events()) events += e.DebugString() + "\n";
  return absl::StrCat("run ", run.name(), " is ", v1::RunStatus_Name(run.status()), " (",
                      run.status_reason(), ") at step ", run.progress().step(), "\nattempts:\n",
                      attempts, "events:\n", events, diagnostics ? diagnostics() : "");
}

// Waits until the run has reached `step`: up to `start_budget` whenever it is not running (its
// start: a pull, the ranks' start; a requeue after a fault), and while it runs, for as long as it
// keeps making progress (kStallLimit). Prints how long the steps took; on failure says where the
// run stands (RunReport).
inline v1::Run WaitForStep(Client& client, const std::string& name, int step,
                           const std::function<std::string()>& diagnostics = {},
                           absl::Duration start_budget = absl::Seconds(120)) {
  v1::Run run = client.WaitForStatus(name, v1::RUN_STATUS_RUNNING, start_budget);
  const absl::Time started = absl::Now();
  const int64_t from = run.progress().step();
  int64_t last_step = from;
  absl::Time last_moved = started, running_since = started;
  std::string why;
  while (run.progress().step() < step && !Ended(run)) {
    const absl::Time now = absl::Now();
    if (run.status() != v1::RUN_STATUS_RUNNING) {
      last_moved = now;
      if (now - running_since > start_budget) {
        why = absl::StrCat("not running for ", absl::FormatDuration(now - running_since));
        break;
      }
    } else {
      running_since = now;
      if (now - last_moved > kStallLimit) {
        why = absl::StrCat("no new step for ", absl::FormatDuration(now - last_moved));
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    run = client.Get(name);
    if (run.progress().step() != last_step) {
      last_step = run.progress().step();
      last_moved = absl::Now();
    }
  }
  if (run.progress().step() < step) {
    INFO(why << " after " << absl::FormatDuration(absl::Now() - started) << " of training\n"
             << RunReport(client, run, diagnostics));
    REQUIRE(run.progress().step() >= step);
  }
  std::printf("%s: steps %lld to %lld took %.1f s\n", name.c_str(), static_cast<long long>(from),
              static_cast<long long>(run.progress().step()),
              absl::ToDoubleSeconds(absl::Now() - started));
  return run;
}

// The same, with rank 0's log in the failure's description.
inline v1::Run WaitForStep(LocalCluster& c, const std::string& name, int step,
                           absl::Duration start_budget = absl::Seconds(120)) {
  return WaitForStep(
      *c.client, name, step,
      [&] { return "rank 0's log:\n" + c.Mcli("logs " + name + " --rank 0").output; },
      start_budget);
}

// The last `last` warnings and errors of a control-plane log (spdlog's " warning [" and
// " error [" lines), for a failure's description.
inline std::string WarningsIn(const std::string& log, size_t last = 60) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, " warning [") || absl::StrContains(line, " error [")) {
      lines.emplace_back(line);
    }
  }
  if (lines.size() > last) lines.erase(lines.begin(), lines.end() - static_cast<long>(last));
  return absl::StrJoin(lines, "\n") + "\n";
}

// Waits until the run of `steps` steps has trained them all and completed (as WaitForStep: for
// as long as it makes progress).
inline v1::Run WaitForCompletion(Client& client, const std::string& name, int steps,
                                 const std::function<std::string()>& diagnostics = {},
                                 absl::Duration start_budget = absl::Seconds(120)) {
  WaitForStep(client, name, steps, diagnostics, start_budget);
  // Its last step is trained: the ranks exit and the attempt's end is recorded, within the
  // stall limit. Anything else fails with where the run stands (a requeue, a sweep, a cordon).
  const absl::Time deadline = absl::Now() + kStallLimit;
  v1::Run run = client.Get(name);
  while (run.status() != v1::RUN_STATUS_COMPLETED && !Ended(run) && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    run = client.Get(name);
  }
  INFO("waited " << absl::FormatDuration(kStallLimit) << " at most for it to complete\n"
                 << RunReport(client, run, diagnostics));
  REQUIRE(run.status() == v1::RUN_STATUS_COMPLETED);
  return run;
}

inline v1::Run WaitForCompletion(LocalCluster& c, const std::string& name, int steps,
                                 absl::Duration start_budget = absl::Seconds(120)) {
  return WaitForCompletion(
      *c.client, name, steps,
      [&] {
        return "nodes:\n" + c.Mcli("get nodes").output + "the server's warnings:\n" +
               WarningsIn(c.server.process.Log()) + "rank 0's log:\n" +
               c.Mcli("logs " + name + " --rank 0").output;
      },
      start_budget);
}

// Waits until the run is past its first checkpoint (step 40; one is committed every 25), then
// kills the second of its two nodes with SIGKILL; returns that node's name. A run that ended
// or stopped moving instead fails the test, with its description and rank 0's log.
inline std::string KillANodeAfterACheckpoint(LocalCluster& c, const std::string& name,
                                             absl::Duration start_budget = absl::Seconds(120)) {
  const v1::Run run = WaitForStep(c, name, 40, start_budget);
  INFO(c.Mcli("describe run " + name).output);
  REQUIRE(run.status() == v1::RUN_STATUS_RUNNING);
  REQUIRE(run.nodes_size() == 2);
  const std::string victim = run.nodes(1).node_name();
  REQUIRE(c.worker(victim).process->Kill(SIGKILL).ok());
  return victim;
}

// After KillANodeAfterACheckpoint killed `victim` under a run of two nodes that accepts one:
// waits until its next attempt runs on the node left (lost, requeued, and shrunk once no node
// came free in time), fails if it ended instead; returns the run and prints how long it took.
inline v1::Run WaitForShrunk(LocalCluster& c, const std::string& name, const std::string& victim,
                             absl::Time killed) {
  v1::Run shrunk;
  for (int i = 0; i < 1200; ++i) {
    shrunk = c.client->Get(name);
    if (shrunk.resumption_index() == 1 && shrunk.status() == v1::RUN_STATUS_RUNNING) break;
    REQUIRE_FALSE(Ended(shrunk));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(c.Mcli("describe run " + name).output);
  REQUIRE(shrunk.status() == v1::RUN_STATUS_RUNNING);
  REQUIRE(shrunk.nodes_size() == 1);
  CHECK(shrunk.nodes(0).node_name() != victim);
  std::printf("%s: running on 1 of 2 nodes %.1f s after the kill\n", name.c_str(),
              absl::ToDoubleSeconds(absl::Now() - killed));
  return shrunk;
}

// The step rank 0's log says the run resumed from: a committed checkpoint (a multiple of 25).
inline int ResumedFromStep(const std::string& logs) {
  std::smatch m;
  REQUIRE(std::regex_search(logs, m, std::regex(R"(resumed from step (\d+))")));
  const int resumed = std::stoi(m[1]);
  CHECK(resumed >= 25);
  CHECK(resumed % 25 == 0);
  return resumed;
}

// The losses rank 0 printed ("step 10/150: loss 6.123456 ..."), by step.
inline std::map<int, double> LossesIn(const std::string& logs) {
  std::map<int, double> losses;
  static const std::regex line(R"(step (\d+)/\d+: loss ([0-9.]+))");
  for (std::sregex_iterator it(logs.begin(), logs.end(), line), end; it != end; ++it) {
    losses[std::stoi((*it)[1])] = std::stod((*it)[2]);
  }
  return losses;
}

inline std::string Example() { return std::string(TESSERA_SOURCE_DIR) + "/examples/gpt-tiny.yaml"; }

// The example's image; the training tests run it on the host's root (`image: host`), which
// test clusters allow, except the one that runs it in its image (train_image_e2e_test).
inline constexpr char kExampleImageLine[] = "\nimage: tessera/train:latest\n";

// The example with `batches` steps and `image`, written into `dir` as `file`.
inline std::string ExampleIn(const std::string& dir, int batches, const std::string& file,
                             const std::string& image = "host") {
  std::ifstream in(Example());
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(yaml.find(kExampleImageLine) != std::string::npos);
  const std::string path = dir + "/" + file;
  std::ofstream(path) << absl::StrReplaceAll(
      yaml, {{"max_duration: 150ba", absl::StrCat("max_duration: ", batches, "ba")},
             {kExampleImageLine, absl::StrCat("\nimage: ", image, "\n")}});
  return path;
}

// The example with `batches` steps, written next to the cluster's markers as `file`.
inline std::string ExampleWith(LocalCluster& c, int batches,
                               const std::string& file = "long.yaml") {
  return ExampleIn(c.marks_dir(), batches, file);
}

// Rank 0's stored log, once it holds step `step`'s line (the shippers catch up after an outage:
// lines are acknowledged only once stored; a minute at most).
inline std::string Rank0LogThrough(LocalCluster& c, const std::string& name, int step) {
  const std::string last = absl::StrCat("step ", step, "/", step, ": loss");
  ShellResult logs;
  for (int i = 0; i < 600; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    logs = c.Mcli("logs " + name + " --rank 0");
    if (absl::StrContains(logs.output, last)) break;
  }
  INFO(logs.output);
  REQUIRE(absl::StrContains(logs.output, last));
  return logs.output;
}

// An undisturbed run of the example on 2 nodes x 2 ranks, trained once per test session by
// the training_baseline fixture (CTest FIXTURES_SETUP training_baseline) for the fault suites to
// compare with: its length (sized from the rate this machine trains at), that rate, and the
// losses rank 0 printed. The file is TESSERA_TRAINING_BASELINE, compiled into the tests that
// require the fixture.
struct TrainingBaseline {
  int steps = 0;
  double steps_per_second = 0;
  std::map<int, double> losses;

  // The steps that take `d` at the measured rate, at least `at_least`.
  int StepsIn(absl::Duration d, int at_least = 20) const {
    return std::max(at_least, static_cast<int>(absl::ToDoubleSeconds(d) * steps_per_second));
  }

  bool Write(const std::string& path) const {
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp);
      out.precision(17);
      out << "steps " << steps << "\nsteps_per_second " << steps_per_second << "\n";
      for (const auto& [step, loss] : losses) out << step << " " << loss << "\n";
      if (!out.flush()) return false;
    }
    return std::rename(tmp.c_str(), path.c_str()) == 0;
  }

  static TrainingBaseline Read(const std::string& path) {
    TrainingBaseline b;
    std::ifstream in(path);
    std::string key_steps, key_rate;
    in >> key_steps >> b.steps >> key_rate >> b.steps_per_second;
    for (int step = 0; in >> step;) in >> b.losses[step];
    INFO(path << ": written by the training_baseline fixture, which ctest runs before the cases "
                 "that need it (ctest -R NAME runs it too)");
    REQUIRE(key_steps == "steps");
    REQUIRE(key_rate == "steps_per_second");
    REQUIRE(b.steps > 0);
    REQUIRE(b.steps_per_second > 0);
    REQUIRE(b.losses.size() == static_cast<size_t>(b.steps / 10));
    return b;
  }
};

// The longest fault a suite puts under a run needs about 40 s of training after step 20 (the
// scheduler leader killed, a new one found, then frozen for 20 s and back). The fixture measures
// the rate alone on the machine (RUN_SERIAL), the fastest any case trains at, so a case's run
// lasts at least this long; the other third is for a machine less busy than it was then.
inline constexpr absl::Duration kBaselineTraining = absl::Seconds(60);

#ifdef TESSERA_TRAINING_BASELINE
inline const TrainingBaseline& Baseline() {
  static const TrainingBaseline baseline = TrainingBaseline::Read(TESSERA_TRAINING_BASELINE);
  return baseline;
}

// A run that a node is killed under (KillANodeAfterACheckpoint, at step 40) must outlast the
// node's detection (a 2.8 s lease, then the other ranks stopped): without it the dead node's
// orphaned ranks and the others could finish the run first. 20 s at the measured rate, in whole
// 50s of steps, at least 100.
inline int KillableRunSteps() {
  return std::max(100, Baseline().StepsIn(absl::Seconds(20)) / 50 * 50);
}
#endif

// Every tenth step's loss line was stored once, and each equals the baseline's.
inline void CheckLossesEqualBaseline(const std::map<int, double>& disturbed,
                                     const TrainingBaseline& baseline) {
  for (int step = 10; step <= baseline.steps; step += 10) {
    INFO("step " << step);
    CHECK(disturbed.count(step) == 1);
  }
  REQUIRE(baseline.losses.size() == disturbed.size());
  for (const auto& [step, loss] : baseline.losses) {
    INFO("step " << step);
    CHECK(disturbed.at(step) == Approx(loss).epsilon(1e-6));
  }
}

}  // namespace tessera::testing
