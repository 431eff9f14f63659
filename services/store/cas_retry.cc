#include "services/store/cas_retry.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::store {

namespace {

// `create` null: a missing node is NOT_FOUND.
absl::StatusOr<v1::Node> WriteWithRetry(NodeStore& nodes, std::string_view name,
                                        const NodeCreation* create, const NodeMutation& mutate) {
  for (int attempt = 0; attempt < kMaxCasAttempts; ++attempt) {
    absl::StatusOr<v1::Node> current = nodes.GetNode(name);
    std::vector<v1::NodeEvent> events;
    if (absl::IsNotFound(current.status()) && create != nullptr) {
      absl::StatusOr<v1::Node> fresh = (*create)(events);
      if (!fresh.ok()) return fresh.status();
      absl::StatusOr<v1::Node> created = nodes.CreateNode(*fresh);
      if (absl::IsAlreadyExists(created.status())) continue;  // read what the winner wrote
      if (!created.ok() || events.empty()) return created;
      // The creation's events go on the node it made, after any writer that came in between.
      return WriteWithRetry(nodes, name, nullptr,
                            [&events](v1::Node&, std::vector<v1::NodeEvent>& record) {
                              record = events;
                              return NodeChange::kWrite;
                            });
    }
    if (!current.ok()) return current.status();
    v1::Node next = *current;
    absl::StatusOr<NodeChange> change = mutate(next, events);
    if (!change.ok()) return change.status();
    if (*change == NodeChange::kNone) return current;
    absl::StatusOr<v1::Node> updated = nodes.UpdateNode(next, current->version(), events);
    // Only a lost race is retried: any other failure would fail again.
    if (!absl::IsAborted(updated.status())) return updated;
  }
  return absl::AbortedError(
      absl::StrCat("node ", std::string(name), " is changing too often; try again"));
}

}  // namespace

absl::StatusOr<v1::Node> UpdateNodeWithRetry(NodeStore& nodes, std::string_view name,
                                             const NodeMutation& mutate) {
  return WriteWithRetry(nodes, name, nullptr, mutate);
}

absl::StatusOr<v1::Node> UpsertNodeWithRetry(NodeStore& nodes, std::string_view name,
                                             const NodeCreation& create,
                                             const NodeMutation& mutate) {
  return WriteWithRetry(nodes, name, &create, mutate);
}

}  // namespace tessera::store
