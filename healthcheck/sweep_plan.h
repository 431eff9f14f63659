#pragma once
// What a sweep runs where. Phase 1: a compute stress test on every node at once. Phase 2: an
// all-reduce canary on each group of neighbouring nodes — nodes sorted by their switch and rack
// labels, then by name, and paired around a ring (a-b, b-c, ..., z-a), so every node is checked
// with two different partners and a bad node shows as the one common to its two failing pairs.

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tessera/v1/nodes.pb.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::health {

struct CanaryConfig {
  double compute_seconds = 1.0;
  // CPU threads of each compute stress test (0: all the node's cores). Simulated nodes that
  // share one machine measure with fewer: with every core each, the test is at the mercy of any
  // other process on the machine (a noise sigma of 0.24-0.27 beside 0.02-0.05 with one thread,
  // bench_health on 2 cores).
  int compute_threads = 0;
  absl::Duration compute_timeout = absl::Seconds(30);
  std::vector<int64_t> cpu_payload_bytes = {1 << 20, 4 << 20, 16 << 20, 64 << 20};
  std::vector<int64_t> gpu_payload_bytes = {1 << 20, 16 << 20, 256 << 20, 1 << 30};
  absl::Duration allreduce_timeout = absl::Seconds(60);
};

// Up to `max_peers` online, schedulable nodes not in `busy`: what a suspect is compared with.
std::vector<std::string> IdlePeers(const std::map<std::string, v1::Node>& nodes,
                                   const std::set<std::string>& busy, int max_peers);

// The sweep's nodes in neighbour order.
std::vector<v1::Node> NeighbourOrder(std::vector<v1::Node> nodes);

// The all-reduce groups of nodes in neighbour order: a ring of pairs for three or more, one
// pair for two, none for one.
std::vector<std::vector<std::string>> RingPairs(const std::vector<std::string>& ordered);

// The groups in rounds in which no node is in two groups at once (two rounds for an even ring,
// three for an odd one): a node's link is measured by one all-reduce at a time.
std::vector<std::vector<std::vector<std::string>>> Rounds(
    const std::vector<std::vector<std::string>>& groups);

struct CanaryDispatch {
  std::string node;
  v1::StartCanary canary;
};

std::vector<CanaryDispatch> ComputePhase(const std::string& sweep_id,
                                         const std::vector<std::string>& nodes,
                                         const CanaryConfig& config);

// The nodes in rounds for the compute stress test: nodes with the same address share a machine
// (a local cluster), so they take turns rather than measure each other; nodes on different
// machines run together.
std::vector<std::vector<std::string>> ComputeRounds(const std::vector<std::string>& nodes,
                                                    const std::map<std::string, v1::Node>& known);

// The ports a stage's groups meet on: group g's is `base + (first + g) % span`, so that every
// one stays in [base, base + span) however many groups there are (groups whose first nodes are
// different machines may share one).
struct RendezvousPorts {
  int base = 0;
  int span = 1;
  int first = 0;
  int For(size_t group) const {
    return base + static_cast<int>((static_cast<size_t>(first) + group) %
                                   static_cast<size_t>(std::max(1, span)));
  }
};

// One dispatch per group member; group g's rendezvous is its first node's address at
// `ports.For(g)`, under a token of its own (RendezvousToken): a node of one group cannot join
// or write into another group's rendezvous.
std::vector<CanaryDispatch> AllReducePhase(const std::string& sweep_id,
                                           const std::vector<std::vector<std::string>>& groups,
                                           const std::map<std::string, v1::Node>& nodes,
                                           const RendezvousPorts& ports,
                                           const CanaryConfig& config);

// A rendezvous token, a secret: 32 hex digits (128 bits) of OpenSSL's RAND_bytes, never of the
// injected Random (whose numbers, sweep ids and ports, are not secrets). ABORTS when the CSPRNG
// fails, as a key's secret does (auth/api_keys.h).
std::string RendezvousToken();

// Results a sweep of these nodes produces: one compute stress per node, one all-reduce per
// group member.
int ExpectedResults(const std::vector<std::string>& nodes);

}  // namespace tessera::health
