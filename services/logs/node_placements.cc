#include "services/logs/node_placements.h"

namespace tessera::logs {
namespace {
constexpr size_t kMaxAttempts = 100'000;
}  // namespace

absl::StatusOr<bool> NodePlacements::PlacedOn(const std::string& run_id, int resumption_index,
                                              const std::string& node) {
  const Attempt key{run_id, resumption_index};
  {
    absl::MutexLock lock(&mu_);
    if (auto it = nodes_.find(key); it != nodes_.end()) return it->second.count(node) > 0;
  }
  auto desc = runs_->DescribeRunById(run_id);
  if (absl::IsNotFound(desc.status())) return false;
  if (!desc.ok()) return desc.status();
  std::set<std::string> placed;
  bool recorded = false;
  for (const auto& a : desc->attempts()) {
    if (a.resumption_index() != resumption_index) continue;
    recorded = true;
    for (const auto& n : a.nodes()) placed.insert(n.node_name());
  }
  const bool on_node = placed.count(node) > 0;
  // An attempt not recorded yet is not remembered: it may be recorded in a moment.
  if (recorded) {
    absl::MutexLock lock(&mu_);
    if (nodes_.size() >= kMaxAttempts) nodes_.clear();
    nodes_[key] = std::move(placed);
  }
  return on_node;
}

}  // namespace tessera::logs
