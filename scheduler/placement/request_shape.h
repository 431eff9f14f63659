#pragma once
// How a request lays out on nodes of a given size. The rules:
//  - gpus >= gpus-per-node (no nodes given): whole nodes, gpus must be a multiple of the node
//    size, nodes = gpus / gpus-per-node;
//  - gpus < gpus-per-node (no nodes given): one node, gpus GPUs on it;
//  - nodes (or node_names) given: gpus / nodes GPUs on each of that many distinct nodes;
//  - gpus = 0 (CPU-only run): `nodes` whole nodes (default 1). A CPU run holds its nodes
//    exclusively; procs_per_node only sets how many ranks start on each node and does not share
//    a node between runs. It goes to CPU-only nodes when the cluster has any, else it holds
//    whole GPU nodes (all their GPUs).

#include "scheduler/placement/types.h"

namespace tessera::scheduler {

struct Shape {
  int nodes = 0;
  // Units per node: GPUs, or the node's whole capacity for a CPU run.
  int per_node = 0;
  // Whether per_node is every unit of the node.
  bool whole_nodes = false;
};

enum class ShapeError : uint8_t {
  kNone,
  kNegative,             // gpus or nodes < 0
  kNoGpusOnNodes,        // GPUs requested from CPU-only nodes
  kNotMultipleOfNode,    // gpus > gpus-per-node and not a multiple of it
  kUneven,               // gpus not divisible by nodes
  kPerNodeTooLarge,      // gpus / nodes > gpus-per-node
  kNodesVsNamesMismatch  // nodes given and different from the number of node_names
};

// The units of a node: its GPUs, or a single slot for a CPU-only node.
inline int NodeCapacity(int gpus_per_node) { return gpus_per_node > 0 ? gpus_per_node : 1; }

// Lays `request` out on nodes with `gpus_per_node` GPUs each; kNone on success.
ShapeError ShapeFor(const ResourceRequest& request, int gpus_per_node, Shape* shape);

}  // namespace tessera::scheduler
