#pragma once
// Read-modify-write of one node under compare-and-set: every writer of the inventory (workers'
// heartbeats, the cordon service, the health API through it, operators' labels) changes nodes
// this way, so that none overwrites another's change.

#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "services/store/node_store.h"

namespace tessera::store {

// How many times a read-modify-write is tried before it gives up: losing this many races in a row
// is far beyond what a node's few writers cause, so the caller is told to try again later.
inline constexpr int kMaxCasAttempts = 20;

// What a mutation decided.
enum class NodeChange {
  kWrite,  // write the edited node (and the events)
  kNone,   // the node is already as wanted: write nothing
};

// Edits `node` (a copy of the node as read) and appends to `events` what to record atomically
// with the update. It runs once per attempt, on a fresh read, so it must decide from what it is
// given, not from an earlier attempt. An error stops the retries and is returned as is.
using NodeMutation =
    std::function<absl::StatusOr<NodeChange>(v1::Node& node, std::vector<v1::NodeEvent>& events)>;

// Reads node `name`, applies `mutate` and writes the result with UpdateNode(next, version read,
// events), starting again from the read whenever another writer moved the node first (ABORTED),
// at most kMaxCasAttempts times. Returns the node as stored: as written, or as read when
// `mutate` answered kNone. NOT_FOUND when there is no such node (and any other read or write
// error as is); ABORTED "node NAME is changing too often; try again" when every attempt lost.
absl::StatusOr<v1::Node> UpdateNodeWithRetry(NodeStore& nodes, std::string_view name,
                                             const NodeMutation& mutate);

// Builds the node to store when none is named `name` yet, and appends to `events` what to record
// with it. Like a mutation it runs once per attempt and must decide from what it is given.
using NodeCreation = std::function<absl::StatusOr<v1::Node>(std::vector<v1::NodeEvent>& events)>;

// As UpdateNodeWithRetry, but a node that does not exist is created from `create` instead of
// NOT_FOUND, and its events are then recorded on it under compare-and-set like any other write
// (CreateNode records none). When another writer creates it first (ALREADY_EXISTS), the node is
// read again and `mutate`d: two workers racing to register one node both end up registering
// against what the winner wrote. Creations and updates share kMaxCasAttempts; the recording of a
// creation's events has attempts of its own, as an UpdateNodeWithRetry.
absl::StatusOr<v1::Node> UpsertNodeWithRetry(NodeStore& nodes, std::string_view name,
                                             const NodeCreation& create,
                                             const NodeMutation& mutate);

}  // namespace tessera::store
