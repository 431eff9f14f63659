// Node selection over the capacity index: best fit for one node, topology-aware for several.

#include <algorithm>

#include "scheduler/placement/capacity_index.h"

namespace tessera::scheduler {

void CapacityIndex::TakeFromGroup(Level level, uint32_t group_id, int per_node, int count,
                                  std::vector<uint32_t>* out) const {
  const Group& group = groups_[level][group_id];
  const int capacity = static_cast<int>(group.buckets.size()) - 1;
  // Best fit inside the group too: the nodes with the fewest free units that suffice.
  for (int f = per_node; f <= capacity && count > 0; ++f) {
    const IndexSet& bucket = group.buckets[f];
    for (uint32_t pos = bucket.First(); pos != IndexSet::kNone && count > 0;
         pos = bucket.Next(pos + 1)) {
      out->push_back(group.members[pos]);
      --count;
    }
  }
}

bool CapacityIndex::SelectNodes(uint32_t pool_id, int per_node, int count,
                                std::vector<uint32_t>* out) const {
  const Pool& pool = pools_[pool_id];
  const PoolIndex& index = index_[pool_id];
  if (per_node < 1 || per_node > pool.capacity || count < 1 ||
      AvailableWithAtLeast(pool_id, per_node) < count) {
    return false;
  }
  const size_t start = out->size();
  if (count == 1) {
    for (int f = per_node; f <= pool.capacity; ++f) {
      const uint32_t offset = index.buckets[f].First();
      if (offset != IndexSet::kNone) {
        out->push_back(pool.first_node + offset);
        return true;
      }
    }
    return false;
  }

  // One switch, else one rack: the group with the fewest qualifying nodes that suffices.
  for (Level level : {kSwitch, kRack}) {
    const auto& ordered = index.by_count[level][per_node];
    auto it = ordered.lower_bound({count, 0});
    if (it != ordered.end()) {
      TakeFromGroup(level, it->second, per_node, count, out);
      std::sort(out->begin() + static_cast<std::ptrdiff_t>(start), out->end());
      return true;
    }
  }

  // Span switches: while no unused switch holds the remainder, take all of the largest one;
  // then the remainder from the smallest switch that holds it; unlabelled nodes last.
  const auto& switches = index.by_count[kSwitch][per_node];
  std::vector<uint32_t> used;
  auto is_used = [&used](uint32_t group) {
    return std::find(used.begin(), used.end(), group) != used.end();
  };
  int remaining = count;
  while (remaining > 0) {
    auto fit = switches.lower_bound({remaining, 0});
    while (fit != switches.end() && is_used(fit->second)) ++fit;
    if (fit != switches.end()) {
      TakeFromGroup(kSwitch, fit->second, per_node, remaining, out);
      remaining = 0;
      break;
    }
    auto largest = switches.rbegin();
    while (largest != switches.rend() && is_used(largest->second)) ++largest;
    if (largest == switches.rend()) break;
    TakeFromGroup(kSwitch, largest->second, per_node, largest->first, out);
    remaining -= largest->first;
    used.push_back(largest->second);
  }
  for (int f = per_node; f <= pool.capacity && remaining > 0; ++f) {
    const IndexSet& bucket = index.buckets[f];
    for (uint32_t offset = bucket.First(); offset != IndexSet::kNone && remaining > 0;
         offset = bucket.Next(offset + 1)) {
      const uint32_t node = pool.first_node + offset;
      if (nodes_[node].group[kSwitch] != kNoNode) continue;  // every switch was taken whole
      out->push_back(node);
      --remaining;
    }
  }
  if (remaining > 0) {  // cannot happen: at_least[per_node] >= count
    out->resize(start);
    return false;
  }
  std::sort(out->begin() + static_cast<std::ptrdiff_t>(start), out->end());
  return true;
}

void CapacityIndex::MostFreeNodes(uint32_t pool_id, int count, std::vector<uint32_t>* out) const {
  const Pool& pool = pools_[pool_id];
  const PoolIndex& index = index_[pool_id];
  const size_t start = out->size();
  for (int f = pool.capacity; f >= 0 && count > 0; --f) {
    const IndexSet& bucket = index.buckets[f];
    for (uint32_t offset = bucket.First(); offset != IndexSet::kNone && count > 0;
         offset = bucket.Next(offset + 1)) {
      out->push_back(pool.first_node + offset);
      --count;
    }
  }
  std::sort(out->begin() + static_cast<std::ptrdiff_t>(start), out->end());
}

}  // namespace tessera::scheduler
