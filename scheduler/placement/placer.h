#pragma once
// The placement cycle: given the cluster (nodes and running allocations) and the queue, decide
// which runs start where, which runs are preempted for them, and which nodes are held back.
//
//  - Order: priority (high > medium > low > lowest), then FIFO by creation time, then run id.
//  - Gang placement: all of a run's nodes or none; a run's nodes are alike (one cluster, one GPU
//    type, one node size) and schedulable (worker online, admin SCHEDULABLE, health not
//    UNHEALTHY).
//  - Order: within a priority, the owner's fair-share rank comes before creation time.
//  - Quotas (quota_ledger.h): in a managed cluster a run takes GPUs within its team's quota, or,
//    when it is preemptible, borrows idle ones beyond it (never by preempting, never by holding
//    a reservation, and only after every run of the queue had its turn within its quota, so
//    that nothing is placed and reclaimed in one cycle). A non-preemptible run over its team's
//    quota waits (kQuotaReached).
//  - Preemption: a run that does not fit may evict preemptible runs of strictly lower priority,
//    and a run within its team's quota may also evict other teams' runs that hold borrowed GPUs
//    (see preemption.h for how victims are chosen). The placement is reported with
//    after_preemption set; the caller stops the victims and requeues them ("Run was preempted").
//  - Shrinking: a run the caller lets shrink (QueuedRun::min_nodes) that can neither fit nor
//    preempt starts on as many free nodes as there are, down to min_nodes, before it would
//    reserve any.
//  - Backfill (EASY, without run-time estimates): the first run of a pool that can neither fit
//    nor preempt reserves the nodes it will start on (those with the most free GPUs); later runs
//    may start only on the pool's other nodes, so they never delay it. There are no duration
//    estimates, so nothing may borrow reserved nodes "until the head's start time": a reserved
//    node's idle GPUs stay idle until the head starts. Reservations last one cycle and are
//    recomputed on the next.
//  - Topology: a multi-node run goes under one switch if it can, else one rack, else across as
//    few switches as possible; node ranks follow (cluster, gpu type, switch, rack, name) order.
//  - Determinism: the decision depends only on the contents of the inputs, not on their order.
//
// The Placer keeps its state between cycles: placements and preemptions it decides are applied
// to it, and the caller reports runs that end (Release) and nodes that change state (a node
// added to or removed from the inventory needs a new Placer). A cycle costs O(Q) to order a
// queue that is nearly in order (O(Q log Q) at worst, see queue_order.h), then per run
// O(pools x GPUs per node) to decide it cannot fit, O(log nodes + nodes placed x GPUs per node)
// to place it; once nothing is free and no preemption is possible for the remaining priorities
// the rest of the queue is not examined. Only a preemption search visits a pool's nodes one by
// one, with per-node summaries and a pool-wide lower bound that cut the scan short.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "scheduler/placement/allocations.h"
#include "scheduler/placement/capacity_index.h"
#include "scheduler/placement/quota_ledger.h"
#include "scheduler/placement/request_shape.h"
#include "scheduler/placement/types.h"

namespace tessera::scheduler {

// How long one queued run's decision took (benchmarks).
struct DecisionTiming {
  size_t queue_index = 0;
  int64_t nanos = 0;
};

struct PlaceOptions {
  // Start time recorded for runs placed in this cycle (victim choice prefers the newest).
  int64_t now_micros = 0;
  // When set, receives the time of each examined run's decision, in examination order (runs
  // left unexamined once the cluster is full are not timed).
  std::vector<DecisionTiming>* timings = nullptr;
};

class Placer {
 public:
  explicit Placer(const ClusterState& state);
  // `nodes` is the index of the cluster's nodes with nothing allocated (CapacityIndex of
  // state.nodes, which is not read): a caller whose nodes did not change keeps one and passes a
  // copy, saving the index's build (sorting and hashing every node) on each cycle.
  Placer(CapacityIndex nodes, const ClusterState& state);

  // One placement cycle over `queue` (in any order). Applies its placements and preemptions to
  // the Placer's state; reservations end with the cycle.
  PlacementDecision PlaceQueue(const std::vector<QueuedRun>& queue,
                               const PlaceOptions& options = {});

  // A run ended (completed, failed, stopped), or a decided placement could not be carried out:
  // its units are free again. Returns false when it held nothing (runs preempted by PlaceQueue
  // are already released).
  bool Release(absl::string_view run_id);
  // A node was cordoned, drained, lost or marked unhealthy (false), or came back (true). Its
  // running allocations stay; it receives nothing new while unschedulable.
  bool SetNodeSchedulable(absl::string_view node, bool schedulable);

  // Whether a running run that holds fewer nodes than `request` asks for could have all of them
  // now, after this cycle's placements: enough available nodes of its shape's size in its pool
  // besides its own, and room in its team's quota for the GPUs it would add.
  bool CanGrow(absl::string_view run_id, absl::string_view team,
               const ResourceRequest& request) const;

  // Introspection (tests, the queue view): free units on a node (-1 when unknown), and
  // whether a run holds resources.
  int FreeUnits(absl::string_view node) const;
  bool IsPlaced(absl::string_view run_id) const;
  const CapacityIndex& capacity() const { return capacity_; }
  const QuotaLedger& quotas() const { return quotas_; }
  // Free units on available nodes of the pools a request matches (the queue view's "N free").
  int FreeUnitsFor(const ResourceRequest& request) const;

 private:
  struct Candidate {
    uint32_t pool;
    Shape shape;
    bool within_quota = true;  // false: the run may only borrow idle GPUs there
  };
  struct Cycle;
  struct Memo;

  // Decides one run; returns true when placed, else fills *waiting's reason.
  bool PlaceRun(Cycle& cycle, const QueuedRun& run, Waiting* waiting);
  bool PlaceNamed(Cycle& cycle, const QueuedRun& run, Waiting* waiting);
  void CollectCandidates(const ResourceRequest& request);
  // Whether the run stays within its team's quota on the candidate.
  bool WithinQuota(const QueuedRun& run, const Candidate& candidate) const;
  void QuotaWait(const QueuedRun& run, uint32_t pool, WaitReason reason, Waiting* waiting) const;
  // For a run left unexamined once the cluster is full: the quota reason when its team's quota
  // stops it anyway (people should learn that, not that GPUs are busy).
  void QuotaOnlyReason(const QueuedRun& run, Waiting* waiting);
  // The second pass for a run that may borrow: idle GPUs left once every run had its turn.
  bool Borrow(Cycle& cycle, const QueuedRun& run);
  // For a run with min_nodes: the most nodes, fewer than it asks for and at least min_nodes,
  // free where it stays within its quota.
  bool Shrink(Cycle& cycle, const QueuedRun& run);
  bool TryPreempt(Cycle& cycle, const QueuedRun& run, const Candidate& candidate,
                  const std::vector<uint32_t>* explicit_nodes);
  void Commit(Cycle& cycle, const QueuedRun& run, const Candidate& candidate,
              const std::vector<uint32_t>& nodes, bool after_preemption);
  void Reserve(Cycle& cycle, const QueuedRun& run, uint32_t pool,
               const std::vector<uint32_t>& nodes);
  // Failed preemption searches, per pool and, when borrowed GPUs may be reclaimed, per team.
  Memo& MemoFor(Cycle& cycle, uint32_t pool, const std::string* reclaiming_team);
  bool PreemptionKnownToFail(Cycle& cycle, const Candidate& candidate, Priority priority,
                             const std::string* reclaiming_team);
  void RememberPreemptionFailure(Cycle& cycle, const Candidate& candidate, Priority priority,
                                 const std::string* reclaiming_team);
  // Adds (+1) or removes (-1) an allocation's GPUs from its team's use.
  void ChargeQuota(uint32_t allocation, int delta);
  void RemoveAllocation(uint32_t allocation);

  CapacityIndex capacity_;
  Allocations allocations_;
  QuotaLedger quotas_;
  // Scratch buffers reused across runs.
  std::vector<Candidate> candidates_;
  std::vector<uint32_t> nodes_;
  std::vector<uint32_t> victims_;
};

}  // namespace tessera::scheduler
