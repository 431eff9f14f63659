#pragma once
// The faults bench_goodput injects and how it repairs what they broke, on a SplitCluster.
//
// Node faults go to one node of the run's current attempt through the health API's
// InjectFault (the worker's own fault injection); control-plane faults are real signals to the
// service processes and a real PostgreSQL restart. Whatever a fault leaves broken (a crashed
// worker, a cordoned node, a killed service) is repaired later, as an operator would, so that
// the next fault finds the cluster whole.

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/goodput/split_cluster.h"

namespace tessera::bench {

// Every kind, in the order the table prints them.
const std::vector<std::string>& AllFaultKinds();
bool IsNodeFault(const std::string& kind);

struct InjectedFault {
  std::string kind;
  std::string target;  // the node or the process
};

// A repair due at a time: a service restarted, a frozen leader resumed, a node made whole.
struct Repair {
  absl::Time due;
  std::string what;
  std::function<absl::Status()> act;
};

class Chaos {
 public:
  explicit Chaos(SplitCluster& cluster) : cluster_(cluster) {}

  // Injects `kind`; `run_nodes` are the nodes of the run's current attempt (node faults pick one
  // with `pick`, an index into them). Schedules the repairs it needs.
  absl::StatusOr<InjectedFault> Inject(const std::string& kind,
                                       const std::vector<std::string>& run_nodes, size_t pick);
  // Runs every repair that is due (all of them with `all`); returns what failed.
  std::vector<std::string> RunRepairs(bool all);
  // Nodes a node fault broke: made whole (fault lifted, uncordoned, restarted) once the run has
  // left them.
  void RepairNodes(const std::vector<std::string>& run_nodes);

 private:
  absl::Status InjectNodeFault(const std::string& node, const std::string& kind);
  absl::Status RepairNode(const std::string& node);

  SplitCluster& cluster_;
  std::vector<Repair> repairs_;
  std::vector<std::string> broken_nodes_;
  std::vector<std::string> crashed_nodes_;
  std::set<std::string> repair_failing_;  // said once until a repair works
};

}  // namespace tessera::bench
