#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "scheduler/placement/validate.h"

namespace tessera::scheduler {
namespace validate_fits_test {

NodeInfo Node(const std::string& name, const std::string& cluster, const std::string& gpu_type,
              int gpus, bool schedulable = true) {
  NodeInfo node;
  node.name = name;
  node.cluster = cluster;
  node.gpu_type = gpu_type;
  node.gpu_count = gpus;
  node.schedulable = schedulable;
  return node;
}

// c1: four 8-GPU h100 nodes (one cordoned: it still counts, it may come back).
// c2: two 4-GPU a100 nodes and one CPU-only node.
Inventory TwoClusters() {
  return Inventory({Node("h1", "c1", "h100", 8), Node("h2", "c1", "h100", 8),
                    Node("h3", "c1", "h100", 8), Node("h4", "c1", "h100", 8, false),
                    Node("a1", "c2", "a100", 4), Node("a2", "c2", "a100", 4),
                    Node("cpu1", "c2", "", 0)});
}

ResourceRequest Request(const std::string& cluster, int gpus, int nodes = 0,
                        const std::string& gpu_type = "", std::vector<std::string> names = {}) {
  ResourceRequest request;
  request.cluster = cluster;
  request.gpus = gpus;
  request.nodes = nodes;
  request.gpu_type = gpu_type;
  request.node_names = std::move(names);
  return request;
}

std::string Error(const ResourceRequest& request, const Inventory& inventory) {
  const absl::Status status = ValidateFits(request, inventory);
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST_CASE("ValidateFits: requests that fit", "[placement][validate]") {
  const Inventory inventory = TwoClusters();
  CHECK(ValidateFits(Request("c1", 1), inventory).ok());
  CHECK(ValidateFits(Request("c1", 8), inventory).ok());
  CHECK(ValidateFits(Request("c1", 32), inventory).ok());  // the cordoned node counts
  CHECK(ValidateFits(Request("c1", 16, 4), inventory).ok());
  CHECK(ValidateFits(Request("c1", 8, 0, "h100"), inventory).ok());
  CHECK(ValidateFits(Request("c2", 8), inventory).ok());     // 2 nodes x 4
  CHECK(ValidateFits(Request("c2", 0), inventory).ok());     // CPU run: the CPU-only node
  CHECK(ValidateFits(Request("c1", 0, 4), inventory).ok());  // no CPU-only nodes: GPU nodes
  CHECK(ValidateFits(Request("c1", 16, 0, "", {"h1", "h3"}), inventory).ok());
  // One cluster: it may be left out.
  const Inventory single({Node("n1", "only", "h100", 8)});
  CHECK(ValidateFits(Request("", 8), single).ok());
}

TEST_CASE("ValidateFits: GPU counts that no node layout can take", "[placement][validate]") {
  const Inventory inventory = TwoClusters();
  CHECK(Error(Request("c1", 12), inventory) ==
        "compute.gpus: 12 GPUs cannot be placed on cluster c1: its nodes have 8 GPUs each; ask "
        "for a multiple of 8 or at most 8");
  CHECK(Error(Request("c1", 12, 0, "h100"), inventory) ==
        "compute.gpus: 12 GPUs cannot be placed on cluster c1: its h100 nodes have 8 GPUs each; "
        "ask for a multiple of 8 or at most 8");
  CHECK(Error(Request("c1", 40), inventory) ==
        "compute.gpus: 40 GPUs need 5 nodes of 8 GPUs but cluster c1 has 4");
  CHECK(Error(Request("c2", 12), inventory) ==
        "compute.gpus: 12 GPUs need 3 nodes of 4 GPUs but cluster c2 has 2 a100 nodes");
  CHECK(Error(Request("c1", 12, 5), inventory) ==
        "compute.gpus: 12 GPUs cannot be split evenly over 5 nodes");
  CHECK(Error(Request("c1", 32, 2), inventory) ==
        "compute.gpus: 32 GPUs over 2 nodes is 16 per node but cluster c1's nodes have 8 GPUs "
        "each");
  CHECK(Error(Request("c1", -1), inventory) ==
        "compute.gpus: must be a non-negative integer, got -1");
  const Inventory cpu_only({Node("cpu1", "c3", "", 0)});
  CHECK(Error(Request("c3", 2), cpu_only) ==
        "compute.gpus: 2 GPUs requested but cluster c3 has no GPU nodes");
}

TEST_CASE("ValidateFits: GPU type, node count and cluster", "[placement][validate]") {
  const Inventory inventory = TwoClusters();
  CHECK(Error(Request("c1", 8, 0, "a100"), inventory) ==
        "compute.gpu_type: cluster c1 has no a100 nodes; it has h100");
  CHECK(Error(Request("c2", 8, 0, "h100"), inventory) ==
        "compute.gpu_type: cluster c2 has no h100 nodes; it has CPU-only, a100");
  CHECK(Error(Request("c1", 0, 5), inventory) ==
        "compute.nodes: 5 nodes requested but cluster c1 has 4");
  CHECK(Error(Request("c1", 40, 5, "h100"), inventory) ==
        "compute.nodes: 5 nodes requested but cluster c1 has 4 h100 nodes");
  CHECK(Error(Request("c2", 0, 2), inventory) ==
        "compute.nodes: 2 nodes requested but cluster c2 has 1 CPU-only node");
  CHECK(Error(Request("c9", 8), inventory) ==
        "compute.cluster: unknown cluster c9; known clusters: c1, c2");
  CHECK(Error(Request("", 8), inventory) ==
        "compute.cluster: required when there are several clusters (c1, c2)");
  const absl::Status none = ValidateFits(Request("c1", 8), Inventory({}));
  CHECK(none.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(none.message() == "compute.cluster: no nodes have registered with the scheduler yet");
}

TEST_CASE("ValidateFits: explicit node names", "[placement][validate]") {
  const Inventory inventory = TwoClusters();
  CHECK(Error(Request("c1", 16, 0, "", {"h1", "x9"}), inventory) ==
        "compute.node_names: node x9 is not in cluster c1");
  CHECK(Error(Request("c1", 16, 0, "", {"h1", "a1"}), inventory) ==
        "compute.node_names: node a1 is not in cluster c1 (it is in c2)");
  CHECK(Error(Request("c1", 16, 0, "", {"h1", "h1"}), inventory) ==
        "compute.node_names: node h1 is listed twice");
  CHECK(Error(Request("c1", 16, 3, "", {"h1", "h2"}), inventory) ==
        "compute.nodes: 3 nodes requested but compute.node_names lists 2");
  CHECK(Error(Request("c1", 8, 0, "a100", {"h1"}), inventory) ==
        "compute.node_names: node h1 has h100 GPUs, not a100");
  CHECK(Error(Request("c2", 4, 0, "", {"a1", "cpu1"}), inventory) ==
        "compute.node_names: nodes a1 (4 a100 GPUs) and cpu1 (CPU-only) differ; a run's "
        "nodes must be alike");
  CHECK(Error(Request("c1", 32, 0, "", {"h1", "h2"}), inventory) ==
        "compute.gpus: 32 GPUs over 2 nodes is 16 per node but node h1 has 8");
  CHECK(Error(Request("c1", 9, 0, "", {"h1", "h2"}), inventory) ==
        "compute.gpus: 9 GPUs cannot be split evenly over 2 nodes");
  CHECK(Error(Request("c2", 1, 0, "", {"cpu1"}), inventory) ==
        "compute.gpus: 1 GPU requested but node cpu1 has no GPUs");
}

}  // namespace validate_fits_test
}  // namespace tessera::scheduler
