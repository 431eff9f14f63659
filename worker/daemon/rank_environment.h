// What each rank of an attempt gets: its environment (every variable of the design plus the
// user's), its working folder and its output files. Pure functions, so the rules are unit-tested
// without starting anything.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/rank_launcher.h"

namespace tessera::worker {

// Where an attempt lives on the node: <state>/runs/<run_id>/attempt-<k>/. The ranks start in
// `work_dir`; their output goes to `logs_dir`/rank-<R>.stdout|.stderr (the spool the log
// shipper reads); the parameters file is `parameters_path`.
struct AttemptPaths {
  std::string dir;
  std::string work_dir;
  std::string logs_dir;      // the ranks' output as the worker spools it: the worker's only
  std::string progress_dir;  // the ranks' progress files: theirs to write
  std::string parameters_path;
  // The same parameters as YAML, where mcli's commands read them (/mnt/config/parameters.yaml
  // inside the sandbox).
  std::string parameters_yaml_path;
};

AttemptPaths PathsFor(const std::string& state_dir, const std::string& run_id, int resumption);

// Output file of one rank's stream ("stdout" or "stderr").
std::string RankLogPath(const AttemptPaths& paths, int rank, const std::string& stream);
// The file a rank reports its training progress to (TESSERA_PROGRESS_FILE).
std::string RankProgressPath(const AttemptPaths& paths, int rank);

// True for the variables Tessera sets for every rank (RANK, WORLD_SIZE, ...).
bool IsReservedRankVariable(const std::string& name);

// The run's parameters (StartAttempt.parameters_json) as a YAML mapping, for
// /mnt/config/parameters.yaml; INVALID_ARGUMENT when the JSON is not an object.
absl::StatusOr<std::string> ParametersAsYaml(const std::string& json);

// Whether the attempt's command runs once for the node (mcli's contract) rather than once per
// local rank.
bool LaunchesPerNode(const v1::StartAttempt& start);

// The node's launcher: the command once, with the run's variables (mcli's: NODE_RANK,
// LOCAL_WORLD_SIZE, WORLD_SIZE, MASTER_ADDR ..., COMPOSER_RUN_NAME; no RANK or LOCAL_RANK, which
// the launcher gives the processes it starts), every GPU of the node's ranks visible, and
// TESSERA_PROGRESS_DIR, where each rank reports to rank-<RANK>.progress. Known to the worker
// by the node's first rank.
RankSpec NodeLauncherSpec(const v1::StartAttempt& start, const AttemptPaths& paths,
                          bool simulated_gpus);

// One RankSpec per local rank (per-rank launch), or the node's launcher alone (per-node). Errors
// name the StartAttempt field that is wrong (no command, a local world size that disagrees with the
// GPUs given, ranks beyond the world size, a user variable that would override one of the
// design's).
absl::StatusOr<std::vector<RankSpec>> BuildRankSpecs(const v1::StartAttempt& start,
                                                     const AttemptPaths& paths,
                                                     bool simulated_gpus);

}  // namespace tessera::worker
