#pragma once
// Which runs of other tenants shared a sweep's nodes while it measured them. A verdict on such a
// node could be a neighbour's doing (a run that takes every core, or holds the canary's port),
// and acting on it would evict every tenant there: the node is drained instead, and measured
// again once idle (deferred_verdicts.h). "Other tenants" are the users other than that of the
// run that triggered the sweep on the nodes that run held then (v1::Sweep.run_nodes: its runs
// there are what it measures), and every user on the other nodes (idle peers when the sweep was
// made: the run resumed on one after a hang or a straggler competes with its canaries like
// anyone's); for a sweep of no run, every run. Runs are looked at when each stage is dispatched and
// at each verdict; what a run that came and went between two looks did goes unseen.

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "healthcheck/health_clients.h"
#include "tessera/v1/health.pb.h"

namespace tessera::health {

class SweepNeighbours {
 public:
  explicit SweepNeighbours(std::shared_ptr<RunsApi> runs) : runs_(std::move(runs)) {}

  // Notes the other tenants' runs on `sweep`'s nodes now. A run manager that cannot be asked
  // leaves what was seen (the next look tries again).
  void Observe(const v1::Sweep& sweep);
  // The other tenants' runs seen on `node` while `sweep` measured it (at its Observe calls;
  // observe at the verdict first): "RUN (USER)", sorted. Empty: the measurements are the node's
  // own.
  std::set<std::string> On(const v1::Sweep& sweep, const std::string& node);
  // A finished sweep's record goes.
  void Forget(const std::string& sweep_id);

 private:
  std::shared_ptr<RunsApi> runs_;
  absl::Mutex mu_;
  // sweep id -> node -> runs seen on it
  std::map<std::string, std::map<std::string, std::set<std::string>>> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::health
