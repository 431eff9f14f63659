#pragma once
// The order in which a cycle considers queued runs: priority (high first), then fair-share rank
// (lower first, fair_share.h), then creation time, then run id, then position. Sorting is adaptive:
// runs are first distributed by priority (a stable counting sort), and within a priority only the
// part that is not already in FIFO order is sorted and merged in, so a queue that arrives nearly in
// order (as one read from the database, or one that grows by appending) costs O(Q) plus O(k log k)
// for k stragglers.

#include <cstdint>
#include <vector>

#include "scheduler/placement/types.h"

namespace tessera::scheduler {

// Indices into `queue`, in placement order.
std::vector<uint32_t> OrderQueue(const std::vector<QueuedRun>& queue);

}  // namespace tessera::scheduler
