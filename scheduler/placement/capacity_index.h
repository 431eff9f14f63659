#pragma once
// Free capacity of the cluster, indexed for placement decisions that do not scan the nodes.
//
// Nodes are grouped into pools of alike nodes (cluster, GPU type, GPUs per node); a run is
// placed inside one pool. Within a pool, the nodes that can receive work (schedulable and not
// reserved: "available") sit in buckets by their number of free units, and keep counts of how
// many have at least f free units. Each pool also groups its nodes by their "switch" and "rack"
// labels; for every f, the groups are ordered by how many of their nodes have at least f free
// units, so "the smallest switch with n nodes of >= f free" is one ordered-set lookup.
//
// A unit is a GPU, or the single slot of a CPU-only node. Node ids run from 0 in the order
// (cluster, gpu_type, gpus per node, switch, rack, name): stable for any input order, and
// consecutive ids are topologically close.

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "scheduler/placement/index_set.h"
#include "scheduler/placement/types.h"

namespace tessera::scheduler {

inline constexpr uint32_t kNoNode = UINT32_MAX;

class CapacityIndex {
 public:
  enum Level : int { kSwitch = 0, kRack = 1 };
  static constexpr int kLevels = 2;

  struct Pool {
    std::string cluster;
    std::string gpu_type;
    int gpus_per_node = 0;
    int capacity = 1;  // units per node
    uint32_t first_node = 0;
    uint32_t node_count = 0;
    int schedulable_nodes = 0;  // reserved ones included
  };

  // Nodes with duplicate names keep the first in id order; free masks start full.
  explicit CapacityIndex(std::vector<NodeInfo> nodes);

  // --- nodes ---
  uint32_t node_count() const { return static_cast<uint32_t>(nodes_.size()); }
  uint32_t FindNode(absl::string_view name) const;  // kNoNode when unknown
  const std::string& NodeName(uint32_t node) const { return names_[node]; }
  uint32_t PoolOf(uint32_t node) const { return nodes_[node].pool; }
  int Capacity(uint32_t node) const { return nodes_[node].capacity; }
  uint64_t FreeMask(uint32_t node) const { return nodes_[node].free_mask; }
  int FreeCount(uint32_t node) const { return nodes_[node].free; }
  bool Schedulable(uint32_t node) const { return nodes_[node].schedulable; }
  bool Reserved(uint32_t node) const { return nodes_[node].reserved; }
  bool Available(uint32_t node) const { return nodes_[node].schedulable && !nodes_[node].reserved; }
  static uint64_t FullMask(int capacity) {
    return capacity >= 64 ? ~uint64_t{0} : (uint64_t{1} << capacity) - 1;
  }

  void SetFreeMask(uint32_t node, uint64_t mask);
  void SetSchedulable(uint32_t node, bool schedulable);
  void SetReserved(uint32_t node, bool reserved);

  // --- pools ---
  uint32_t pool_count() const { return static_cast<uint32_t>(pools_.size()); }
  const Pool& pool(uint32_t pool) const { return pools_[pool]; }
  // Pools matching a request's cluster and GPU type (empty matches any), in id order.
  const std::vector<uint32_t>& PoolsFor(absl::string_view cluster,
                                        absl::string_view gpu_type) const;
  // Available nodes of the pool with at least `units` free units.
  int AvailableWithAtLeast(uint32_t pool, int units) const {
    const auto& at_least = index_[pool].at_least;
    return units < static_cast<int>(at_least.size()) ? at_least[units] : 0;
  }
  // Available nodes of the pool with exactly `units` free units, as offsets from first_node.
  const IndexSet& AvailableWithFree(uint32_t pool, int units) const {
    return index_[pool].buckets[units];
  }
  // Free units on available nodes, over all pools.
  uint64_t available_free_units() const { return available_free_units_; }
  // Increases whenever units become available in the pool (released, uncordoned, unreserved).
  uint64_t epoch(uint32_t pool) const { return index_[pool].epoch; }

  // --- selection (node_select.cc) ---
  // Chooses `count` available nodes of the pool with at least `per_node` free units each and
  // appends their ids in ascending order. One node: the one with the fewest free units that
  // fits (best fit). Several: under one switch, else one rack, picking the group with the fewest
  // such nodes that suffices (best fit), else spanning as few switches as it can. Returns false
  // (appending nothing) when fewer than `count` nodes qualify.
  bool SelectNodes(uint32_t pool, int per_node, int count, std::vector<uint32_t>* out) const;
  // The `count` available nodes of the pool with the most free units (ties: lowest id).
  void MostFreeNodes(uint32_t pool, int count, std::vector<uint32_t>* out) const;

 private:
  struct NodeState {
    uint64_t free_mask = 0;
    uint32_t pool = 0;
    uint32_t group[kLevels] = {kNoNode, kNoNode};      // kNoNode: unlabelled
    uint32_t group_pos[kLevels] = {kNoNode, kNoNode};  // position among the group's members
    uint8_t capacity = 1;
    uint8_t free = 0;
    bool schedulable = false;
    bool reserved = false;
  };
  struct Group {
    std::vector<uint32_t> members;  // node ids, ascending
    std::vector<IndexSet> buckets;  // [free units] -> member positions of available nodes
    std::vector<int> at_least;      // [f] -> available members with >= f free
  };
  struct PoolIndex {
    std::vector<IndexSet> buckets;  // [free units] -> node offsets of available nodes
    std::vector<int> at_least;      // [f] -> available nodes with >= f free (size capacity + 2)
    // [level][f] -> (at_least[f], group id) of the pool's groups with at_least[f] > 0.
    std::vector<std::set<std::pair<int, uint32_t>>> by_count[kLevels];
    uint64_t epoch = 0;
  };

  // Moves a node between "free units" states; -1 means not indexed (unavailable).
  void Reindex(uint32_t node, int old_free, int new_free);
  void TakeFromGroup(Level level, uint32_t group, int per_node, int count,
                     std::vector<uint32_t>* out) const;

  std::vector<NodeState> nodes_;
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, uint32_t> by_name_;
  std::vector<Pool> pools_;
  std::vector<PoolIndex> index_;
  std::vector<Group> groups_[kLevels];
  uint64_t available_free_units_ = 0;

  std::vector<uint32_t> all_pools_;
  absl::flat_hash_map<std::string, std::vector<uint32_t>> pools_by_cluster_;
  absl::flat_hash_map<std::string, std::vector<uint32_t>> pools_by_type_;
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, std::vector<uint32_t>>>
      pools_by_cluster_type_;
};

}  // namespace tessera::scheduler
