#pragma once
// What the end-to-end tests of tessera-train share: workers whose ranks find tessera-train and a
// shared folder, the example config with another length, and the losses rank 0 printed.

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/support/local_cluster.h"

namespace tessera::testing {

// A worker whose ranks find tessera-train and share a folder with the other nodes.
inline void StartTrainingWorker(LocalCluster& c, const std::string& name, const std::string& shared,
                                const std::string& scheduler_endpoint = "",
                                const std::vector<std::string>& env = {}) {
  c.StartWorker(name, 2, TrainingRankEnv(shared), scheduler_endpoint, env);
}

// Waits until the run has reached `step`: up to 90 s to start, then up to 240 s of training
// (generous because CI runs two heavy tests at once on two cores). Prints how long the steps
// took; on failure says where the run stands, with its attempts and events and, when given,
// what `diagnostics` adds (rank 0's log).
inline v1::Run WaitForStep(Client& client, const std::string& name, int step,
                           const std::function<std::string()>& diagnostics = {}) {
  v1::Run run = client.WaitForStatus(name, v1::RUN_STATUS_RUNNING, absl::Seconds(90));
  const absl::Time started = absl::Now();
  const int64_t from = run.progress().step();
  auto ended = [](const v1::Run& r) {
    return r.status() == v1::RUN_STATUS_COMPLETED || r.status() == v1::RUN_STATUS_FAILED ||
           r.status() == v1::RUN_STATUS_STOPPED;
  };
  while (absl::Now() < started + absl::Seconds(240) && run.progress().step() < step &&
         !ended(run)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    run = client.Get(name);
  }
  if (run.progress().step() < step) {
    const v1::RunDescription d = client.Describe(name);
    std::string attempts;
    for (const auto& a : d.attempts()) attempts += a.DebugString() + "\n";
    std::string events;
    for (const auto& e : d.events()) events += e.DebugString() + "\n";
    INFO("run " << name << " is " << v1::RunStatus_Name(run.status()) << " (" << run.status_reason()
                << ") at step " << run.progress().step() << " after "
                << absl::FormatDuration(absl::Now() - started) << "\nattempts:\n"
                << attempts << "events:\n"
                << events << (diagnostics ? diagnostics() : std::string()));
    REQUIRE(run.progress().step() >= step);
  }
  std::printf("%s: steps %lld to %lld took %.1f s\n", name.c_str(), static_cast<long long>(from),
              static_cast<long long>(run.progress().step()),
              absl::ToDoubleSeconds(absl::Now() - started));
  return run;
}

// The same, with rank 0's log in the failure's description.
inline v1::Run WaitForStep(LocalCluster& c, const std::string& name, int step) {
  return WaitForStep(*c.client, name, step, [&] {
    return "rank 0's log:\n" + c.Mcli("logs " + name + " --rank 0").output;
  });
}

// Waits until the run is past its first checkpoint (step 40; one is committed every 25), then
// kills the second of its two nodes with SIGKILL; returns that node's name. A run that ended
// instead fails the test, with its description and rank 0's log.
inline std::string KillANodeAfterACheckpoint(LocalCluster& c, const std::string& name,
                                             absl::Duration timeout) {
  v1::Run run = c.client->Get(name);
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline && run.progress().step() < 40 &&
         run.status() != v1::RUN_STATUS_COMPLETED && run.status() != v1::RUN_STATUS_FAILED &&
         run.status() != v1::RUN_STATUS_STOPPED) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    run = c.client->Get(name);
  }
  INFO(c.Mcli("describe run " + name).output);
  INFO(c.Mcli("logs " + name + " --rank 0").output);
  REQUIRE(run.status() == v1::RUN_STATUS_RUNNING);
  REQUIRE(run.progress().step() >= 40);
  REQUIRE(run.nodes_size() == 2);
  const std::string victim = run.nodes(1).node_name();
  REQUIRE(c.worker(victim).process->Kill(SIGKILL).ok());
  return victim;
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

}  // namespace tessera::testing
