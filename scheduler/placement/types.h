#pragma once
// The placement vocabulary: what the scheduler knows about nodes, running allocations and the
// queue, and what a placement cycle decides. Plain structs, free of protobuf, so that the hot
// path (10,000 nodes, 100,000 queued runs) works on compact data; proto_convert.h maps the API
// messages onto them.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::scheduler {

// mcli's priorities, in increasing order; the values match tessera.v1.Priority.
enum class Priority : uint8_t { kLowest = 1, kLow = 2, kMedium = 3, kHigh = 4 };
inline constexpr int kPriorityLevels = 5;  // indexable by static_cast<int>(Priority)

const char* PriorityName(Priority priority);

// One node of the inventory. Only schedulable nodes (worker online, admin SCHEDULABLE, health
// HEALTHY or not yet known) receive new work; the others keep their running allocations.
struct NodeInfo {
  std::string name;
  std::string cluster;
  std::string gpu_type;        // empty for CPU-only nodes
  int gpu_count = 0;           // 0 = CPU-only node; above kMaxGpusPerNode, clamped to it
  std::string rack;            // the "rack" label; empty when unlabelled
  std::string network_switch;  // the "switch" label; empty when unlabelled
  bool schedulable = true;
};

inline constexpr int kMaxGpusPerNode = 64;

// What a run asks for (compute section of the run spec).
struct ResourceRequest {
  std::string cluster;                  // empty: any cluster
  std::string gpu_type;                 // empty: any GPU type
  int gpus = 0;                         // total GPUs; 0 = CPU-only run
  int nodes = 0;                        // 0 = derived from gpus
  std::vector<std::string> node_names;  // explicit nodes, in node-rank order
};

// A run waiting in the queue.
struct QueuedRun {
  std::string run_id;
  int64_t created_at_micros = 0;  // FIFO key within a priority and fair-share rank
  Priority priority = Priority::kMedium;
  bool preemptible = false;
  ResourceRequest request;
  // The team whose quota the run uses; empty for a user in no team.
  std::string team;
  // Its owner's place in fair share (fair_share.h): within a priority, lower ranks go first.
  uint32_t share_rank = 0;
  // Above 0: the run may start on as few as this many nodes (of its shape's size) when all of
  // them cannot be had, neither free nor by preemption. The caller sets it only for a run that
  // may shrink now (compute.min_nodes, resumed, waited long enough).
  int min_nodes = 0;
  // Nodes it is not placed on (the node a hang of its last attempt was blamed on, for a while).
  std::vector<std::string> avoid_nodes = {};
};

// A team's GPU quota in one cluster, for one GPU type or (empty gpu_type) all of them. A cluster
// that some quota names is managed: there, a team may hold at most its quota (all of its
// quotas that apply), except by borrowing idle GPUs with preemptible runs; a team with no quota
// in it may only borrow. In a cluster no quota names, GPUs are not limited by team.
struct TeamQuota {
  std::string team;
  std::string cluster;
  std::string gpu_type;
  int gpus = 0;
};

// Part of an allocation on one node. Empty gpu_indices on a GPU node means a CPU-only run that
// holds the whole node.
struct NodeAssignment {
  std::string node;
  int node_rank = 0;
  std::vector<int> gpu_indices;
};

// A run that holds resources now.
struct RunningAllocation {
  std::string run_id;
  Priority priority = Priority::kMedium;
  bool preemptible = false;
  // When the current attempt started: among equally cheap victims the newest loses least work.
  int64_t started_at_micros = 0;
  std::vector<NodeAssignment> nodes;
  std::string team = {};  // whose quota it uses
};

struct ClusterState {
  std::vector<NodeInfo> nodes;
  std::vector<RunningAllocation> running;
  std::vector<TeamQuota> quotas = {};
};

// --- decisions --------------------------------------------------------------------------------

struct Placement {
  std::string run_id;
  std::vector<NodeAssignment> nodes;  // ordered by node rank
  // The run starts on resources freed by the preemptions listed for it: the caller must stop
  // those victims before starting it.
  bool after_preemption = false;
  // The team was at or over its quota: the run borrows idle GPUs, and gives them back (is
  // preempted) when a team within its quota needs them.
  bool borrowed = false;
};

struct Preemption {
  std::string victim_run_id;
  std::string for_run_id;
  // The victim's team was over its quota (it held borrowed GPUs) and the run it makes room for
  // is within its own: the GPUs are returned, whatever the priorities.
  bool reclaim = false;
};

// Nodes held back for a run that heads its pool's queue and cannot start yet (EASY backfill):
// later runs may start only on other nodes.
struct Reservation {
  std::string run_id;
  std::vector<std::string> nodes;
};

enum class WaitReason : uint8_t {
  // Enough schedulable nodes exist but their GPUs are busy. Once no unit is free anywhere and
  // no remaining run may preempt, the cycle stops examining the queue and every run left gets
  // this reason.
  kWaitingForCapacity,
  // The run heads its pool's queue: nodes are reserved for it as they free up.
  kHoldsReservation,
  // It would fit now, but only on nodes reserved for a run ahead of it.
  kBlockedByReservation,
  // Too few schedulable nodes of the right kind (others are cordoned, draining, lost or
  // unhealthy).
  kNotEnoughSchedulableNodes,
  // No node of the inventory matches the request (unknown cluster or GPU type, sizes that can
  // never fit): ValidateFits rejects such a request at submit.
  kNoMatchingNodes,
  // The run already holds an allocation (it appears twice, or is running).
  kAlreadyPlaced,
  // Its team's quota is reached and the run is not preemptible, so it may not borrow.
  kQuotaReached,
  // Its team's quota is reached; the run is preemptible and waits for idle GPUs to borrow.
  kWaitingToBorrow,
};

const char* WaitReasonName(WaitReason reason);

struct Waiting {
  size_t queue_index = 0;  // index into the queue passed to PlaceQueue
  WaitReason reason = WaitReason::kWaitingForCapacity;
  // For the quota reasons: the team's GPUs in use and its quota, in the tightest quota that
  // applies (the cluster's, or the GPU type's).
  int quota_used = 0;
  int quota = 0;
  // For kBlockedByReservation: the reservation (an index into the decision's reservations)
  // holding the nodes it would fit on; -1 when none. An index, not a name: 100,000 waiting
  // runs are decided every cycle.
  int reservation = -1;
};

struct PlacementDecision {
  std::vector<Placement> placements;    // in placement order (priority, then FIFO)
  std::vector<Preemption> preemptions;  // victims, grouped by the run they make room for
  std::vector<Reservation> reservations;
  std::vector<Waiting> waiting;  // every queued run not placed, in placement order
};

}  // namespace tessera::scheduler
