#pragma once
// Submit-time check that a request can ever be placed on a cluster's nodes, whatever they run
// now and whether or not they are cordoned: a request rejected here would wait forever. Errors
// are INVALID_ARGUMENT and start with the field they are about ("compute.gpus: ...").

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "scheduler/placement/types.h"

namespace tessera::scheduler {

// A summary of the node inventory: per cluster, how many nodes of each (GPU type, GPU count).
class Inventory {
 public:
  explicit Inventory(const std::vector<NodeInfo>& nodes);

  struct Pool {
    std::string gpu_type;
    int gpus_per_node = 0;
    int nodes = 0;
  };
  struct Cluster {
    std::vector<Pool> pools;  // sorted by (gpu_type, gpus_per_node)
    int nodes = 0;
  };
  struct Node {
    std::string cluster;
    std::string gpu_type;
    int gpus_per_node = 0;
  };

  const std::map<std::string, Cluster>& clusters() const { return clusters_; }
  // nullptr when no node has this name.
  const Node* FindNode(const std::string& name) const;

 private:
  std::map<std::string, Cluster> clusters_;
  absl::flat_hash_map<std::string, Node> nodes_;
};

absl::Status ValidateFits(const ResourceRequest& request, const Inventory& inventory);

}  // namespace tessera::scheduler
