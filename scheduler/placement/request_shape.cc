#include "scheduler/placement/request_shape.h"

namespace tessera::scheduler {

ShapeError ShapeFor(const ResourceRequest& request, int gpus_per_node, Shape* shape) {
  const int gpus = request.gpus;
  const int names = static_cast<int>(request.node_names.size());
  if (gpus < 0 || request.nodes < 0) return ShapeError::kNegative;
  if (names > 0 && request.nodes > 0 && request.nodes != names) {
    return ShapeError::kNodesVsNamesMismatch;
  }
  const int given_nodes = names > 0 ? names : request.nodes;
  const int capacity = NodeCapacity(gpus_per_node);
  if (gpus == 0) {
    *shape = Shape{given_nodes > 0 ? given_nodes : 1, capacity, true};
    return ShapeError::kNone;
  }
  if (gpus_per_node <= 0) return ShapeError::kNoGpusOnNodes;
  if (given_nodes > 0) {
    if (gpus % given_nodes != 0) return ShapeError::kUneven;
    const int per_node = gpus / given_nodes;
    if (per_node > gpus_per_node) return ShapeError::kPerNodeTooLarge;
    *shape = Shape{given_nodes, per_node, per_node == gpus_per_node};
    return ShapeError::kNone;
  }
  if (gpus <= gpus_per_node) {
    *shape = Shape{1, gpus, gpus == gpus_per_node};
    return ShapeError::kNone;
  }
  if (gpus % gpus_per_node != 0) return ShapeError::kNotMultipleOfNode;
  *shape = Shape{gpus / gpus_per_node, gpus_per_node, true};
  return ShapeError::kNone;
}

}  // namespace tessera::scheduler
