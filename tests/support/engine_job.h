#pragma once
// Runs tessera-train as a real multi-process job for tests: N rank processes with the worker's
// variables (RANK, WORLD_SIZE, MASTER_ADDR ...), each with its own progress file and log.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "worker/progress/progress_file.h"

namespace tessera::testing {

// A tokenized copy of real text (the licences under /usr/share/common-licenses), made once per
// test binary with tessera-data.
const std::string& LicenceDataset();

class EngineJob {
 public:
  // Starts `world` ranks of tessera-train with `config_path`; `extra_env` goes to every rank.
  // `ranks_per_node` over 1: tessera-train is started once per node of that many ranks, as
  // mcli launches a command (NODE_RANK, LOCAL_WORLD_SIZE, no RANK), and starts them itself.
  // `simulated_node_size` over 0 (with a process per rank): the ranks are told they sit on
  // nodes of that many (LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK). Under either, "{node}" in
  // an `extra_env` value becomes the process's node index (a folder per node, say).
  EngineJob(const std::string& folder, const std::string& config_path, int world,
            std::map<std::string, std::string> extra_env = {}, int ranks_per_node = 1,
            int simulated_node_size = 0);
  // Waits for every process started to exit (a rank each, or a node's launcher each); returns
  // their exit codes.
  std::vector<int> Wait(absl::Duration timeout = absl::Seconds(240));
  // Waits until every rank has stopped itself (SIGSTOP), then SIGKILLs them all.
  void KillWhenStopped(absl::Duration timeout = absl::Seconds(120));
  // The progress rank `rank` reported, by step (the newest record of each step; the ready
  // record before the first step left out).
  std::map<int64_t, progress::ProgressRecord> Progress(int rank) const;
  // The step rank `rank`'s ready record said it starts from (the record before its first step),
  // if it wrote one.
  std::optional<int64_t> ReadyStep(int rank) const;
  // Rank `rank`'s output: its node's, under a node's launch.
  std::string Log(int rank) const;
  // The process of rank `rank` (its node's launcher, under a node's launch).
  pid_t Pid(int rank) const { return ranks_[static_cast<size_t>(rank / ranks_per_node_)].pid(); }

 private:
  std::string folder_;
  int ranks_per_node_ = 1;
  std::vector<Process> ranks_;
  std::vector<std::string> progress_files_, logs_;
};

}  // namespace tessera::testing
