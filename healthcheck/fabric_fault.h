#pragma once
// Faults of the fabric between nodes rather than of a node. The all-reduce stage pairs the
// sweep's nodes around a ring ordered by their `switch`, then `rack` labels (sweep_plan.h), so
// the nodes behind one switch sit together: they pair with each other and, at the two ends, with
// the nodes beside them. When every pair that reaches the nodes behind one switch failed or was
// slow while pairs elsewhere passed, the verdict names the switch: its nodes are cordoned
// together, with one reason that names it and the evidence, and return together
// (remediation.h).
//
// For each label of FabricLabels() in turn (`switch`, the larger domain, first) and each of its
// values that at least two of the sweep's nodes carry, the domain is named when:
//   - every all-reduce pair with a member in it is bad (JudgeGroups): each of its nodes failed
//     every pair it was in, which would condemn it on its own, so naming the switch condemns
//     no node on weaker evidence than before;
//   - every pair with no member in a named domain passed, and there is one: a sweep whose pairs
//     all failed says nothing of where (a pair with a node the sweep could not reach is not
//     judged, so it counts neither way; one inside the domain keeps it from being named);
//   - none of its nodes was condemned before the all-reduce (compute stress, a GPU fault): a
//     node's own fault is not its switch's.
// A node behind a named switch is not looked at again for its rack. A node's `port` label, where
// there is one, is named with its switch in the evidence.
//
// Not named: a switch whose links to the rest failed while its nodes still reach each other
// (an uplink). The ring leaves a switch through two pairs only, too little evidence to cordon
// every node behind it; its nodes are cleared by their good pairs, as any node is.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "healthcheck/anomaly.h"
#include "tessera/v1/health.pb.h"
#include "tessera/v1/nodes.pb.h"

namespace tessera::health {

// The node labels that name a fabric domain, largest first.
const std::vector<std::string>& FabricLabels();

struct NamedFabricFault {
  v1::FabricFault fault;  // label, value, nodes, verdict, finding
  // For the cordons: the pairs' figures ("fabric_pairs_bad", ...), by name.
  std::map<std::string, double> evidence;
};

// `groups` are the all-reduce groups and `judged` their outcomes (JudgeGroups, same order);
// `known` the nodes with their labels; `condemned_before` the nodes already condemned by an
// earlier stage.
std::vector<NamedFabricFault> FindFabricFaults(const std::vector<std::string>& nodes,
                                               const std::vector<std::vector<std::string>>& groups,
                                               const std::vector<GroupJudgement>& judged,
                                               const std::map<std::string, v1::Node>& known,
                                               const std::set<std::string>& condemned_before);

}  // namespace tessera::health
