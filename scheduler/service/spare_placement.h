#pragma once
// The placement passes that use a pool's hot spares (SpareNodes keeps them), on either side of
// SchedulingCycle::Place's ordinary pass, which sees spares as unschedulable. Made once a cycle
// from the cycle's nodes; each pass places with a Placer of its own over the nodes it may use.
// Resumptions keep their teams within their quotas over the whole cluster; preemptible work
// borrows, as it may anywhere.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "scheduler/placement/capacity_index.h"
#include "scheduler/placement/placer.h"
#include "tessera/v1/nodes.pb.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::scheduler {

// The runs of `queue` that the last pass may place on spares: the preemptible ones not
// `placed`, none while a run of `queued` resuming after a node fault waits (a node it kept is
// suspected, its attempt still drains), which would otherwise see the spare lent again and its
// borrower stopped every cycle.
std::vector<QueuedRun> MayBorrowSpares(const std::vector<QueuedRun>& queue,
                                       const std::vector<v1::Run>& queued,
                                       const std::set<std::string>& placed);

class SparePlacement {
 public:
  // `nodes` the cycle's copy (Node.spare says which are spares), `suspects` the nodes that
  // missed a beat (nothing is placed there). Both outlive this.
  SparePlacement(const std::vector<v1::Node>& nodes, const std::set<std::string>& suspects,
                 int64_t now_micros);

  // The first pass, before the ordinary one: the queued runs resuming after a node fault
  // (queue[i] made from queued_runs[i]), on the pool's spares and the nodes they ran on (which
  // hold their image), with their whole size. Only preemptible work on a spare is stopped for
  // one (a placement after_preemption, whatever the priorities); one placed where work is still
  // leaving (`stopping`: told to stop, or ended and draining) waits for it (after_preemption
  // too). `state` is the cluster as the ordinary pass will see it, its quotas included, and
  // `index` its nodes (the cycle's CapacityIndex): a resumption that would take its team past
  // a quota, counting what the team holds anywhere (teammates may have taken the GPUs it gave
  // up), is not placed here but left to the ordinary pass, which applies the quota as to any
  // run (it borrows idle GPUs if preemptible, or waits saying so). Empty when no node is a
  // spare: such runs are then placed as any other.
  PlacementDecision Resumptions(const CapacityIndex& index, const std::vector<QueuedRun>& queue,
                                const std::vector<const v1::Run*>& queued_runs,
                                const ClusterState& state,
                                const std::set<std::string>& stopping) const;

  // The last pass: the preemptible runs the ordinary pass left waiting, on the spares' idle GPUs
  // (after what `state` holds and `ordinary` placed; not on the spares in `held`, which
  // resumptions wait for), stopping nothing and starting nothing that would have to wait.
  PlacementDecision Preemptible(const std::vector<QueuedRun>& preemptible,
                                const ClusterState& state, const PlacementDecision& ordinary,
                                const std::set<std::string>& held) const;

 private:
  const std::vector<v1::Node>& nodes_;
  const std::set<std::string>& suspects_;
  const int64_t now_micros_;
};

}  // namespace tessera::scheduler
