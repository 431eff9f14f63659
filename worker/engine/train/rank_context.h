#pragma once
// Where this process sits in the job, from the environment the worker gives every rank
// (RANK, WORLD_SIZE, LOCAL_RANK, ...). Without them tessera-train runs as a single rank, so it
// also works standalone.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::engine {

struct RankContext {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string run_name;
  std::string run_id;  // RUN_ID; empty when run by hand
  int resumption_index = 0;
  std::string parameters_path;  // PARAMETERS
  std::string progress_file;    // TESSERA_PROGRESS_FILE
  // The node's memory folder for this run's in-memory checkpoints and the bytes they may take
  // there (TESSERA_MEMORY_CHECKPOINT_DIR, _BYTES; 0: no limit); empty: the worker gives none.
  std::string memory_checkpoint_dir;
  int64_t memory_checkpoint_bytes = 0;
};

// Reads the variables from `env`; a malformed or inconsistent one is an error naming it.
absl::StatusOr<RankContext> RankContextFromEnv(const std::map<std::string, std::string>& env);

// The process environment as a map.
std::map<std::string, std::string> ProcessEnvironment();

}  // namespace tessera::engine
