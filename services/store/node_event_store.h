#pragma once
// The node event log: cordons, uncordons, drains, losses, faults (owned by the cordon service).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/v1/cordon.pb.h"

namespace tessera::store {

class NodeEventStore {
 public:
  virtual ~NodeEventStore() = default;

  // Assigns an id that is larger than every earlier event's.
  virtual absl::StatusOr<v1::NodeEvent> AppendNodeEvent(const v1::NodeEvent& event) = 0;
  // Oldest first, filtered by node names, types and after_id; at most filter.limit (0: all).
  virtual absl::StatusOr<std::vector<v1::NodeEvent>> ListNodeEvents(
      const v1::NodeEventFilter& filter) = 0;
  // Removes the oldest events that happened before `before`, at most `limit` of them (the
  // retention of node history); how many it removed.
  virtual absl::StatusOr<int64_t> DeleteNodeEventsBefore(absl::Time before, int limit) = 0;
};

}  // namespace tessera::store
