#include "scheduler/placement/queue_order.h"

#include <algorithm>
#include <array>

namespace tessera::scheduler {
namespace {

// A compact sort key: the runs themselves are large and scattered in memory.
struct Key {
  uint32_t share_rank;
  int64_t created;
  uint32_t index;
};

}  // namespace

std::vector<uint32_t> OrderQueue(const std::vector<QueuedRun>& queue) {
  std::array<std::vector<Key>, kPriorityLevels> by_priority;
  std::array<size_t, kPriorityLevels> counts{};
  for (const QueuedRun& run : queue) ++counts[static_cast<int>(run.priority)];
  for (int p = 0; p < kPriorityLevels; ++p) by_priority[p].reserve(counts[p]);
  for (size_t i = 0; i < queue.size(); ++i) {
    by_priority[static_cast<int>(queue[i].priority)].push_back(
        Key{queue[i].share_rank, queue[i].created_at_micros, static_cast<uint32_t>(i)});
  }
  const auto before = [&queue](const Key& a, const Key& b) {
    if (a.share_rank != b.share_rank) return a.share_rank < b.share_rank;
    if (a.created != b.created) return a.created < b.created;
    const int by_id = queue[a.index].run_id.compare(queue[b.index].run_id);
    if (by_id != 0) return by_id < 0;
    return a.index < b.index;
  };
  std::vector<uint32_t> order;
  order.reserve(queue.size());
  for (int p = kPriorityLevels - 1; p >= 0; --p) {
    std::vector<Key>& keys = by_priority[p];
    const auto sorted_end = std::is_sorted_until(keys.begin(), keys.end(), before);
    if (sorted_end != keys.end()) {
      std::sort(sorted_end, keys.end(), before);
      std::inplace_merge(keys.begin(), sorted_end, keys.end(), before);
    }
    for (const Key& key : keys) order.push_back(key.index);
  }
  return order;
}

}  // namespace tessera::scheduler
