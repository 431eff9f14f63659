#pragma once
// tessera-train started once per node (mcli's contract: NODE_RANK, LOCAL_WORLD_SIZE and no RANK)
// starts the node's ranks itself, as `composer -n` and torchrun do: one process per local rank,
// each told its RANK, LOCAL_RANK and progress file, and waits for them. The first to fail stops
// the others, and the launcher exits as it did, so the run ends with that rank's code.

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::engine {

// One local rank's environment: the launcher's, with RANK, LOCAL_RANK and, where the worker
// named a progress folder (TESSERA_PROGRESS_DIR), TESSERA_PROGRESS_FILE.
using RankEnvironment = std::map<std::string, std::string>;

// The local ranks to start, when `env` is a node's launch (LOCAL_WORLD_SIZE or NODE_RANK set, RANK
// not); nullopt when this process is a rank itself (or runs alone). The node's first rank is
// TESSERA_FIRST_RANK, else NODE_RANK × LOCAL_WORLD_SIZE. Errors name the variable that is wrong.
absl::StatusOr<std::optional<std::vector<RankEnvironment>>> PlanLocalRanks(
    const std::map<std::string, std::string>& env);

// Starts `program argv...` once per environment, waits for all, and returns the exit code to
// exit with: 0 when every rank succeeded, else the first failure's (128 + N for a signal N).
// The first failure stops the others: SIGTERM, then SIGKILL after `grace`. The launcher itself
// outlives a stop signal sent to its group (the ranks, in the same group, get it directly and
// checkpoint), so that it can still report how they ended.
int RunLocalRanks(const std::string& program, const std::vector<std::string>& argv,
                  const std::vector<RankEnvironment>& ranks, absl::Duration grace);

}  // namespace tessera::engine
