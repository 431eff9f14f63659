#include "scheduler/placement/capacity_index.h"

#include <algorithm>
#include <bit>
#include <map>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "scheduler/placement/request_shape.h"

namespace tessera::scheduler {
namespace {

int ClampedGpus(const NodeInfo& node) { return std::clamp(node.gpu_count, 0, kMaxGpusPerNode); }

auto SortKey(const NodeInfo& node) {
  return std::tie(node.cluster, node.gpu_type, node.gpu_count, node.network_switch, node.rack,
                  node.name);
}

const std::vector<uint32_t> kNoPools;

}  // namespace

CapacityIndex::CapacityIndex(std::vector<NodeInfo> nodes) {
  for (NodeInfo& node : nodes) node.gpu_count = ClampedGpus(node);
  std::sort(nodes.begin(), nodes.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return SortKey(a) < SortKey(b); });
  absl::flat_hash_set<std::string> seen;
  std::vector<NodeInfo> unique;
  unique.reserve(nodes.size());
  for (NodeInfo& node : nodes) {
    if (seen.insert(node.name).second) unique.push_back(std::move(node));
  }

  nodes_.resize(unique.size());
  names_.reserve(unique.size());
  by_name_.reserve(unique.size());
  for (uint32_t id = 0; id < unique.size(); ++id) {
    const NodeInfo& info = unique[id];
    names_.push_back(info.name);
    by_name_.emplace(info.name, id);
    const bool new_pool = pools_.empty() || pools_.back().cluster != info.cluster ||
                          pools_.back().gpu_type != info.gpu_type ||
                          pools_.back().gpus_per_node != info.gpu_count;
    if (new_pool) {
      Pool pool;
      pool.cluster = info.cluster;
      pool.gpu_type = info.gpu_type;
      pool.gpus_per_node = info.gpu_count;
      pool.capacity = NodeCapacity(info.gpu_count);
      pool.first_node = id;
      pools_.push_back(std::move(pool));
    }
    Pool& pool = pools_.back();
    ++pool.node_count;
    NodeState& state = nodes_[id];
    state.pool = static_cast<uint32_t>(pools_.size() - 1);
    state.capacity = static_cast<uint8_t>(pool.capacity);
    state.free_mask = FullMask(pool.capacity);
    state.free = static_cast<uint8_t>(pool.capacity);
    state.schedulable = info.schedulable;
  }

  // Groups: per pool and level, the nodes sharing a label value.
  index_.resize(pools_.size());
  for (uint32_t p = 0; p < pools_.size(); ++p) {
    const Pool& pool = pools_[p];
    PoolIndex& index = index_[p];
    for (int f = 0; f <= pool.capacity; ++f) index.buckets.emplace_back(pool.node_count);
    index.at_least.assign(pool.capacity + 2, 0);
    for (int level = 0; level < kLevels; ++level) {
      index.by_count[level].resize(pool.capacity + 1);
      std::map<std::string, uint32_t> group_of_label;
      for (uint32_t id = pool.first_node; id < pool.first_node + pool.node_count; ++id) {
        const NodeInfo& info = unique[id];
        const std::string& label = level == kSwitch ? info.network_switch : info.rack;
        if (label.empty()) continue;
        auto [it, inserted] =
            group_of_label.emplace(label, static_cast<uint32_t>(groups_[level].size()));
        if (inserted) groups_[level].emplace_back();
        Group& group = groups_[level][it->second];
        nodes_[id].group[level] = it->second;
        nodes_[id].group_pos[level] = static_cast<uint32_t>(group.members.size());
        group.members.push_back(id);
      }
    }
  }
  for (int level = 0; level < kLevels; ++level) {
    for (Group& group : groups_[level]) {
      const int capacity = nodes_[group.members.front()].capacity;
      const auto size = static_cast<uint32_t>(group.members.size());
      for (int f = 0; f <= capacity; ++f) group.buckets.emplace_back(size);
      group.at_least.assign(capacity + 2, 0);
    }
  }
  for (uint32_t id = 0; id < nodes_.size(); ++id) {
    if (nodes_[id].schedulable) {
      ++pools_[nodes_[id].pool].schedulable_nodes;
      Reindex(id, -1, nodes_[id].free);
    }
  }

  for (uint32_t p = 0; p < pools_.size(); ++p) {
    all_pools_.push_back(p);
    pools_by_cluster_[pools_[p].cluster].push_back(p);
    pools_by_type_[pools_[p].gpu_type].push_back(p);
    pools_by_cluster_type_[pools_[p].cluster][pools_[p].gpu_type].push_back(p);
  }
}

uint32_t CapacityIndex::FindNode(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? kNoNode : it->second;
}

const std::vector<uint32_t>& CapacityIndex::PoolsFor(absl::string_view cluster,
                                                     absl::string_view gpu_type) const {
  if (cluster.empty()) {
    if (gpu_type.empty()) return all_pools_;
    auto it = pools_by_type_.find(gpu_type);
    return it == pools_by_type_.end() ? kNoPools : it->second;
  }
  if (gpu_type.empty()) {
    auto it = pools_by_cluster_.find(cluster);
    return it == pools_by_cluster_.end() ? kNoPools : it->second;
  }
  auto it = pools_by_cluster_type_.find(cluster);
  if (it == pools_by_cluster_type_.end()) return kNoPools;
  auto type = it->second.find(gpu_type);
  return type == it->second.end() ? kNoPools : type->second;
}

void CapacityIndex::SetFreeMask(uint32_t node, uint64_t mask) {
  NodeState& state = nodes_[node];
  mask &= FullMask(state.capacity);
  const int old_free = state.free;
  const int new_free = std::popcount(mask);
  state.free_mask = mask;
  state.free = static_cast<uint8_t>(new_free);
  if (new_free > old_free) ++index_[state.pool].epoch;
  if (Available(node) && new_free != old_free) Reindex(node, old_free, new_free);
}

void CapacityIndex::SetSchedulable(uint32_t node, bool schedulable) {
  NodeState& state = nodes_[node];
  if (state.schedulable == schedulable) return;
  const bool was_available = Available(node);
  state.schedulable = schedulable;
  pools_[state.pool].schedulable_nodes += schedulable ? 1 : -1;
  const bool available = Available(node);
  if (available) ++index_[state.pool].epoch;
  if (was_available != available) {
    Reindex(node, was_available ? state.free : -1, available ? state.free : -1);
  }
}

void CapacityIndex::SetReserved(uint32_t node, bool reserved) {
  NodeState& state = nodes_[node];
  if (state.reserved == reserved) return;
  const bool was_available = Available(node);
  state.reserved = reserved;
  const bool available = Available(node);
  if (available) ++index_[state.pool].epoch;
  if (was_available != available) {
    Reindex(node, was_available ? state.free : -1, available ? state.free : -1);
  }
}

void CapacityIndex::Reindex(uint32_t node, int old_free, int new_free) {
  const NodeState& state = nodes_[node];
  PoolIndex& index = index_[state.pool];
  const uint32_t offset = node - pools_[state.pool].first_node;
  if (old_free >= 0) index.buckets[old_free].Erase(offset);
  if (new_free >= 0) index.buckets[new_free].Insert(offset);
  available_free_units_ += std::max(new_free, 0);
  available_free_units_ -= std::max(old_free, 0);
  // at_least[f] counts nodes with free >= f: it changes for f in (low, high].
  const int low = std::min(old_free, new_free);
  const int high = std::max(old_free, new_free);
  const int delta = new_free > old_free ? 1 : -1;
  for (int f = low + 1; f <= high; ++f) index.at_least[f] += delta;
  for (int level = 0; level < kLevels; ++level) {
    const uint32_t group_id = state.group[level];
    if (group_id == kNoNode) continue;
    Group& group = groups_[level][group_id];
    const uint32_t pos = state.group_pos[level];
    if (old_free >= 0) group.buckets[old_free].Erase(pos);
    if (new_free >= 0) group.buckets[new_free].Insert(pos);
    for (int f = low + 1; f <= high; ++f) {
      const int before = group.at_least[f];
      const int after = before + delta;
      group.at_least[f] = after;
      if (f == 0) continue;
      auto& ordered = index.by_count[level][f];
      if (before > 0) ordered.erase({before, group_id});
      if (after > 0) ordered.insert({after, group_id});
    }
  }
}

}  // namespace tessera::scheduler
