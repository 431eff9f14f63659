#pragma once
// The node inventory (owned by the scheduler; the cordon service changes admin state).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/store/write_fence.h"
#include "tessera/v1/cordon.pb.h"
#include "tessera/v1/nodes.pb.h"

namespace tessera::store {

// When a live node was last heard from, for people (leases live in the scheduler's memory).
struct HeartbeatSummary {
  std::string node;
  absl::Time last_heartbeat;
  absl::Time lease_expires;
};

// Puts a summary's times on `node` where they are later than its own (both implementations).
void KeepLaterHeartbeat(v1::Node& node, absl::Time last_heartbeat, absl::Time lease_expires);

class NodeStore {
 public:
  virtual ~NodeStore() = default;

  // Stores a new node with version 1. ALREADY_EXISTS when the name is taken. With a `fence`,
  // FAILED_PRECONDITION (StaleTermError) unless its term is current, checked in the same
  // transaction (as for UpdateNode).
  virtual absl::StatusOr<v1::Node> CreateNode(const v1::Node& node,
                                              const std::optional<WriteFence>& fence = {}) = 0;
  virtual absl::StatusOr<v1::Node> GetNode(std::string_view name) = 0;
  // Sorted by name.
  virtual absl::StatusOr<std::vector<v1::Node>> ListNodes(const v1::NodeFilter& filter) = 0;

  // Compare-and-set on the version, appending `events` to the node event log atomically.
  // ABORTED when another writer moved the node first; NOT_FOUND when it does not exist.
  virtual absl::StatusOr<v1::Node> UpdateNode(const v1::Node& node, int64_t expected_version,
                                              const std::vector<v1::NodeEvent>& events,
                                              const std::optional<WriteFence>& fence = {}) = 0;

  // Stores many nodes' last heartbeat and lease expiry in one write, without a new version: a
  // summary, not a state change, so it never conflicts with one (and a node's state never
  // goes back by it: the later of two times is kept). Nodes that are gone are skipped.
  virtual absl::Status RecordHeartbeats(const std::vector<HeartbeatSummary>& beats) = 0;

  // Events about a node outlive it. NOT_FOUND when absent.
  virtual absl::Status DeleteNode(std::string_view name) = 0;
};

}  // namespace tessera::store
