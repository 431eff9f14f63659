#pragma once
// The StartAttempt command that starts one node's ranks of a placed attempt: the run's command
// and environment, and each rank's place in the job (the run contract's variables come from it).

#include <map>
#include <string>
#include <vector>

#include "scheduler/service/scheduler_config.h"
#include "tessera/v1/nodes.pb.h"
#include "tessera/v1/runs.pb.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::scheduler {

// Ranks on `node` of `run`'s attempt: one per GPU; without GPUs, the run's procs_per_node, else
// the node's own (its kProcsPerNodeLabel, from tessera-worker --procs-per-node), else one.
// `nodes` holds the inventory by name (a node missing from it counts as unlabelled).
int RanksOnNode(const v1::Run& run, const v1::AttemptNode& node,
                const std::map<std::string, const v1::Node*>& nodes);

// The command for `node`, whose ranks are [first_rank, first_rank + local_size) of `world_size`.
v1::StartAttempt StartCommand(const v1::Run& run, const v1::Attempt& attempt,
                              const v1::AttemptNode& node, int world_size, int local_size,
                              int first_rank, const SchedulerConfig& config);

// Each cluster's driver version: the one more than half of its nodes that have a driver report
// (a cluster without such a majority has none, and its drivers are not checked).
std::map<std::string, std::string> ClusterDriverVersions(const std::vector<v1::Node>& nodes);

// What the worker's pre-flight checks on `node` expect: the UUIDs its GPUs at the attempt's
// indices registered with, its cluster's driver version, the clock bound.
v1::PreflightExpectations PreflightFor(const v1::AttemptNode& node, const v1::Node* inventory,
                                       const std::map<std::string, std::string>& drivers,
                                       const SchedulerConfig& config);

}  // namespace tessera::scheduler
