#include "services/store/fenced_node_store.h"

#include <utility>

namespace tessera::store {
namespace {

class FencedNodeStore final : public NodeStore {
 public:
  FencedNodeStore(std::shared_ptr<NodeStore> nodes, FenceSource fence)
      : nodes_(std::move(nodes)), fence_(std::move(fence)) {}

  absl::StatusOr<v1::Node> CreateNode(const v1::Node& node,
                                      const std::optional<WriteFence>& /*ignored*/) override {
    auto fence = fence_();
    if (!fence.ok()) return fence.status();
    return nodes_->CreateNode(node, *fence);
  }
  absl::StatusOr<v1::Node> GetNode(std::string_view name) override { return nodes_->GetNode(name); }
  absl::StatusOr<std::vector<v1::Node>> ListNodes(const v1::NodeFilter& filter) override {
    return nodes_->ListNodes(filter);
  }
  absl::StatusOr<v1::Node> UpdateNode(const v1::Node& node, int64_t expected_version,
                                      const std::vector<v1::NodeEvent>& events,
                                      const std::optional<WriteFence>& /*ignored*/) override {
    auto fence = fence_();
    if (!fence.ok()) return fence.status();
    return nodes_->UpdateNode(node, expected_version, events, *fence);
  }
  // Not fenced: a summary from a leader that was deposed keeps the later times only.
  absl::Status RecordHeartbeats(const std::vector<HeartbeatSummary>& beats) override {
    return nodes_->RecordHeartbeats(beats);
  }
  absl::Status DeleteNode(std::string_view name) override { return nodes_->DeleteNode(name); }

 private:
  const std::shared_ptr<NodeStore> nodes_;
  const FenceSource fence_;
};

}  // namespace

std::shared_ptr<NodeStore> MakeFencedNodeStore(std::shared_ptr<NodeStore> nodes,
                                               FenceSource fence) {
  return std::make_shared<FencedNodeStore>(std::move(nodes), std::move(fence));
}

}  // namespace tessera::store
