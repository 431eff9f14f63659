#include "scheduler/placement/validate.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/placement/request_shape.h"

namespace tessera::scheduler {
namespace {

absl::Status Invalid(const std::string& field, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

std::string Plural(int count, const std::string& noun) {
  return absl::StrCat(count, " ", noun, count == 1 ? "" : "s");
}

std::string TypeName(const std::string& gpu_type) {
  return gpu_type.empty() ? std::string("CPU-only") : gpu_type;
}

// "8 h100 GPUs" or "CPU-only".
std::string Describe(const Inventory::Node& node) {
  if (node.gpus_per_node == 0) return "CPU-only";
  return absl::StrCat(node.gpus_per_node, " ", node.gpu_type, " GPUs");
}

// "4 or 8" for the distinct node sizes.
std::string JoinSizes(const std::set<int>& sizes) { return absl::StrJoin(sizes, " or "); }

// Checks a request that names its nodes.
absl::Status ValidateNamedNodes(const ResourceRequest& request, const std::string& cluster,
                                const Inventory& inventory) {
  const int names = static_cast<int>(request.node_names.size());
  if (request.nodes > 0 && request.nodes != names) {
    return Invalid("compute.nodes",
                   absl::StrCat(Plural(request.nodes, "node"),
                                " requested but compute.node_names lists ", names));
  }
  std::set<std::string> seen;
  const Inventory::Node* first = nullptr;
  for (const std::string& name : request.node_names) {
    if (!seen.insert(name).second) {
      return Invalid("compute.node_names", absl::StrCat("node ", name, " is listed twice"));
    }
    const Inventory::Node* node = inventory.FindNode(name);
    if (node == nullptr || node->cluster != cluster) {
      std::string where = node == nullptr ? "" : absl::StrCat(" (it is in ", node->cluster, ")");
      return Invalid("compute.node_names",
                     absl::StrCat("node ", name, " is not in cluster ", cluster, where));
    }
    if (!request.gpu_type.empty() && node->gpu_type != request.gpu_type) {
      return Invalid("compute.node_names",
                     absl::StrCat("node ", name, " has ", TypeName(node->gpu_type), " GPUs, not ",
                                  request.gpu_type));
    }
    if (first == nullptr) {
      first = node;
    } else if (node->gpu_type != first->gpu_type || node->gpus_per_node != first->gpus_per_node) {
      return Invalid(
          "compute.node_names",
          absl::StrCat("nodes ", request.node_names[0], " (", Describe(*first), ") and ", name,
                       " (", Describe(*node), ") differ; a run's nodes must be alike"));
    }
  }
  Shape shape;
  switch (ShapeFor(request, first->gpus_per_node, &shape)) {
    case ShapeError::kNone:
      return absl::OkStatus();
    case ShapeError::kNoGpusOnNodes:
      return Invalid("compute.gpus",
                     absl::StrCat(Plural(request.gpus, "GPU"), " requested but node ",
                                  request.node_names[0], " has no GPUs"));
    case ShapeError::kUneven:
      return Invalid(
          "compute.gpus",
          absl::StrCat(request.gpus, " GPUs cannot be split evenly over ", Plural(names, "node")));
    case ShapeError::kPerNodeTooLarge:
      return Invalid("compute.gpus",
                     absl::StrCat(request.gpus, " GPUs over ", Plural(names, "node"), " is ",
                                  request.gpus / names, " per node but node ",
                                  request.node_names[0], " has ", first->gpus_per_node));
    default:
      return Invalid("compute", "cannot be placed on the nodes in compute.node_names");
  }
}

}  // namespace

Inventory::Inventory(const std::vector<NodeInfo>& nodes) {
  std::map<std::string, std::map<std::pair<std::string, int>, int>> counts;
  for (const NodeInfo& node : nodes) {
    const int gpus = std::clamp(node.gpu_count, 0, kMaxGpusPerNode);
    ++counts[node.cluster][{node.gpu_type, gpus}];
    nodes_[node.name] = Node{node.cluster, node.gpu_type, gpus};
  }
  for (const auto& [name, pools] : counts) {
    Cluster& cluster = clusters_[name];
    for (const auto& [key, count] : pools) {
      cluster.pools.push_back(Pool{key.first, key.second, count});
      cluster.nodes += count;
    }
  }
}

const Inventory::Node* Inventory::FindNode(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

absl::Status ValidateFits(const ResourceRequest& request, const Inventory& inventory) {
  if (request.gpus < 0) {
    return Invalid("compute.gpus",
                   absl::StrCat("must be a non-negative integer, got ", request.gpus));
  }
  if (request.nodes < 0) {
    return Invalid("compute.nodes",
                   absl::StrCat("must be a positive integer, got ", request.nodes));
  }
  const auto& clusters = inventory.clusters();
  if (clusters.empty()) {
    return absl::FailedPreconditionError(
        "compute.cluster: no nodes have registered with the scheduler yet");
  }
  std::vector<std::string> known;
  for (const auto& [name, cluster] : clusters) known.push_back(name);
  std::string cluster_name = request.cluster;
  if (cluster_name.empty()) {
    if (clusters.size() > 1) {
      return Invalid("compute.cluster", absl::StrCat("required when there are several clusters (",
                                                     absl::StrJoin(known, ", "), ")"));
    }
    cluster_name = clusters.begin()->first;
  }
  auto found = clusters.find(cluster_name);
  if (found == clusters.end()) {
    return Invalid("compute.cluster",
                   absl::StrCat("unknown cluster ", cluster_name,
                                "; known clusters: ", absl::StrJoin(known, ", ")));
  }
  const Inventory::Cluster& cluster = found->second;
  if (!request.node_names.empty()) return ValidateNamedNodes(request, cluster_name, inventory);

  // The pools the placer would consider: GPU runs need GPU nodes; CPU-only runs use CPU-only
  // nodes when the cluster has any.
  std::vector<const Inventory::Pool*> pools;
  std::set<std::string> types;
  bool has_cpu_pool = false;
  for (const Inventory::Pool& pool : cluster.pools) {
    types.insert(TypeName(pool.gpu_type));
    if (!request.gpu_type.empty() && pool.gpu_type != request.gpu_type) continue;
    if (request.gpus > 0 && pool.gpus_per_node == 0) continue;
    has_cpu_pool = has_cpu_pool || pool.gpus_per_node == 0;
    pools.push_back(&pool);
  }
  if (request.gpus == 0 && has_cpu_pool) {
    std::erase_if(pools, [](const Inventory::Pool* pool) { return pool->gpus_per_node != 0; });
  }
  if (pools.empty()) {
    if (!request.gpu_type.empty()) {
      return Invalid("compute.gpu_type",
                     absl::StrCat("cluster ", cluster_name, " has no ", request.gpu_type,
                                  " nodes; it has ", absl::StrJoin(types, ", ")));
    }
    return Invalid("compute.gpus",
                   absl::StrCat(Plural(request.gpus, "GPU"), " requested but cluster ",
                                cluster_name, " has no GPU nodes"));
  }

  // Fits when one pool of alike nodes takes the shape; otherwise explain with the pools' sizes.
  const std::string whose = request.gpu_type.empty()
                                ? absl::StrCat("its nodes")
                                : absl::StrCat("its ", request.gpu_type, " nodes");
  std::set<int> sizes;
  int most_nodes = 0;  // the largest pool where the shape is valid
  int needed_nodes = 0;
  ShapeError first_error = ShapeError::kNone;
  for (const Inventory::Pool* pool : pools) {
    Shape shape;
    const ShapeError error = ShapeFor(request, pool->gpus_per_node, &shape);
    sizes.insert(pool->gpus_per_node);
    if (error != ShapeError::kNone) {
      if (first_error == ShapeError::kNone) first_error = error;
      continue;
    }
    if (shape.nodes <= pool->nodes) return absl::OkStatus();
    if (pool->nodes >= most_nodes) {
      most_nodes = pool->nodes;
      needed_nodes = shape.nodes;
    }
  }
  const std::string node_sizes = JoinSizes(sizes);
  const int largest = *sizes.rbegin();
  if (needed_nodes > 0) {
    // "4", or "4 h100 nodes" when only some of the cluster's nodes qualify.
    std::string has = absl::StrCat(most_nodes);
    if (pools.size() > 1) {
      has = absl::StrCat("at most ", most_nodes, " alike nodes");
    } else if (!request.gpu_type.empty() || pools.size() < cluster.pools.size()) {
      has = Plural(most_nodes, absl::StrCat(TypeName(pools[0]->gpu_type), " node"));
    }
    if (request.nodes > 0 || request.gpus == 0) {
      return Invalid("compute.nodes",
                     absl::StrCat(Plural(needed_nodes, "node"), " requested but cluster ",
                                  cluster_name, " has ", has));
    }
    return Invalid("compute.gpus",
                   absl::StrCat(request.gpus, " GPUs need ", needed_nodes, " nodes of ", largest,
                                " GPUs but cluster ", cluster_name, " has ", has));
  }
  switch (first_error) {
    case ShapeError::kNotMultipleOfNode:
      return Invalid(
          "compute.gpus",
          absl::StrCat(request.gpus, " GPUs cannot be placed on cluster ", cluster_name, ": ",
                       whose, " have ", node_sizes, " GPUs each; ask for a multiple of ",
                       node_sizes, " or at most ", largest));
    case ShapeError::kUneven:
      return Invalid("compute.gpus",
                     absl::StrCat(request.gpus, " GPUs cannot be split evenly over ",
                                  Plural(request.nodes, "node")));
    case ShapeError::kPerNodeTooLarge:
      return Invalid(
          "compute.gpus",
          absl::StrCat(request.gpus, " GPUs over ", Plural(request.nodes, "node"), " is ",
                       request.gpus / request.nodes, " per node but cluster ", cluster_name, "'s",
                       whose.substr(3), " have ", node_sizes, " GPUs each"));
    default:
      return Invalid("compute", absl::StrCat("cannot be placed on cluster ", cluster_name));
  }
}

}  // namespace tessera::scheduler
