#pragma once
// What the worker knows of one rank's output files and process, shared by the parts that follow
// a rank: the log shipper (its spool files) and the progress watcher (its progress file).

#include <sys/types.h>

#include <string>

#include "absl/time/time.h"

namespace tessera::worker {

// One rank's output and process.
struct RankOutput {
  std::string run_id;
  int resumption_index = 0;
  int node_rank = 0;
  int rank = 0;
  std::string stdout_path, stderr_path;
  // Where the rank may report training progress (TESSERA_PROGRESS_FILE).
  std::string progress_path;
  // The run's hang_timeout: a rank whose progress stops for this long is hung (0: never).
  absl::Duration hang_timeout = absl::ZeroDuration();
  pid_t pid = 0;  // the rank's process (0: not known)
};

}  // namespace tessera::worker
