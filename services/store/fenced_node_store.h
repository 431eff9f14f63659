#pragma once
// The node store as a leader writes to it: every write carries the leader's current term (a
// WriteFence from `fence`), so a demoted leader's writes are refused, and a write while this
// instance does not lead is not even sent. Reads pass through.

#include <memory>

#include "services/store/node_store.h"
#include "services/store/write_fence.h"

namespace tessera::store {

std::shared_ptr<NodeStore> MakeFencedNodeStore(std::shared_ptr<NodeStore> nodes, FenceSource fence);

}  // namespace tessera::store
