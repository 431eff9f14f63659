#include "services/store/cas_retry.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::store {

absl::StatusOr<v1::Node> UpdateNodeWithRetry(NodeStore& nodes, std::string_view name,
                                             const NodeMutation& mutate) {
  for (int attempt = 0; attempt < kMaxCasAttempts; ++attempt) {
    absl::StatusOr<v1::Node> current = nodes.GetNode(name);
    if (!current.ok()) return current.status();
    v1::Node next = *current;
    std::vector<v1::NodeEvent> events;
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

}  // namespace tessera::store
