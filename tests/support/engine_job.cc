#include "tests/support/engine_job.h"

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/support/control_plane.h"
#include "tests/support/free_port.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {

const std::string& LicenceDataset() {
  // Removed when the test binary exits.
  static const TempDir dir("tessera-engine-data");
  static const std::string folder = [] {
    const std::string out = dir.path + "/licences";
    auto converted = RunCommand({BinaryPath("tessera-data"), "convert", "--input",
                                 "/usr/share/common-licenses", "--output", out, "--tokenizer",
                                 "bpe", "--vocab-size", "512", "--seq-len", "32"});
    INFO(converted.status().ToString());
    REQUIRE(converted.ok());
    return out;
  }();
  return folder;
}

EngineJob::EngineJob(const std::string& folder, const std::string& config_path, int world,
                     std::map<std::string, std::string> extra_env, int ranks_per_node,
                     int simulated_node_size)
    : folder_(folder), ranks_per_node_(ranks_per_node) {
  std::filesystem::create_directories(folder);
  const int port = FreePort();
  static int job = 0;
  ++job;
  const bool per_node = ranks_per_node > 1;
  const std::string progress_dir = absl::StrCat(folder, "/job", job, "-progress");
  std::filesystem::create_directories(progress_dir);
  for (int r = 0; r < world; ++r) {
    // Under a node's launch each rank finds its file by RANK in the progress folder, as the
    // worker's contract says (TESSERA_PROGRESS_DIR).
    progress_files_.push_back(per_node
                                  ? absl::StrCat(progress_dir, "/rank-", r, ".progress")
                                  : absl::StrCat(folder, "/job", job, "-rank", r, ".progress"));
  }
  for (int first = 0; first < world; first += ranks_per_node) {
    const int node = first / ranks_per_node;
    logs_.push_back(per_node ? absl::StrCat(folder, "/job", job, "-node", node, ".log")
                             : absl::StrCat(folder, "/job", job, "-rank", first, ".log"));
    std::vector<std::string> argv = {"/usr/bin/env", absl::StrCat("WORLD_SIZE=", world),
                                     "MASTER_ADDR=127.0.0.1", absl::StrCat("MASTER_PORT=", port),
                                     "TESSERA_CACHE_DIR=" + folder + "/cache"};
    if (per_node) {
      argv.insert(argv.end(), {absl::StrCat("NODE_RANK=", node),
                               absl::StrCat("LOCAL_WORLD_SIZE=", ranks_per_node),
                               "TESSERA_PROGRESS_DIR=" + progress_dir});
    } else {
      const int node_size = simulated_node_size > 0 ? simulated_node_size : world;
      argv.insert(argv.end(),
                  {absl::StrCat("RANK=", first), absl::StrCat("LOCAL_RANK=", first % node_size),
                   absl::StrCat("LOCAL_WORLD_SIZE=", node_size),
                   absl::StrCat("NODE_RANK=", first / node_size),
                   "TESSERA_PROGRESS_FILE=" + progress_files_[first]});
    }
    const int node_index = simulated_node_size > 0 ? first / simulated_node_size : node;
    for (const auto& [k, v] : extra_env) {
      argv.push_back(k + "=" + absl::StrReplaceAll(v, {{"{node}", absl::StrCat(node_index)}}));
    }
    argv.push_back(BinaryPath("tessera-train"));
    argv.push_back("--config");
    argv.push_back(config_path);
    auto p = Process::Start(argv, logs_.back());
    REQUIRE(p.ok());
    ranks_.push_back(*std::move(p));
  }
}

std::vector<int> EngineJob::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<int> codes;
  for (auto& p : ranks_) {
    while (p.Running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    auto status = p.Kill(SIGKILL, absl::Seconds(5));  // collects the exit status
    if (!status.ok()) {
      codes.push_back(-1);
    } else {
      codes.push_back(WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status));
    }
  }
  return codes;
}

void EngineJob::KillWhenStopped(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (auto& p : ranks_) {
    for (;;) {
      std::ifstream stat(absl::StrCat("/proc/", p.pid(), "/stat"));
      std::string pid, comm, state;
      stat >> pid >> comm >> state;
      if (state == "T") break;
      INFO("rank pid " << p.pid() << " state " << state << "\n" << p.Log());
      REQUIRE(absl::Now() < deadline);
      REQUIRE(state != "Z");
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  for (auto& p : ranks_) REQUIRE(p.Kill(SIGKILL).ok());
}

std::map<int64_t, progress::ProgressRecord> EngineJob::Progress(int rank) const {
  std::map<int64_t, progress::ProgressRecord> by_step;
  std::ifstream in(progress_files_[static_cast<size_t>(rank)]);
  std::string line;
  while (std::getline(in, line)) {
    auto r = progress::ProgressFromJsonLine(line);
    if (r.ok() && !r->ready) by_step[r->step] = *r;  // the ready record is no step's
  }
  return by_step;
}

std::optional<int64_t> EngineJob::ReadyStep(int rank) const {
  std::optional<int64_t> step;
  std::ifstream in(progress_files_[static_cast<size_t>(rank)]);
  for (std::string line; std::getline(in, line);) {
    auto r = progress::ProgressFromJsonLine(line);
    if (r.ok() && r->ready) step = r->step;
  }
  return step;
}

std::string EngineJob::Log(int rank) const {
  return ranks_[static_cast<size_t>(rank / ranks_per_node_)].Log();
}

}  // namespace tessera::testing
