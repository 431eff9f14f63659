#include "scheduler/service/placement_index.h"

#include <utility>

#include "scheduler/placement/proto_convert.h"

namespace tessera::scheduler {

void PlacementIndex::Refresh(const std::vector<v1::Node>& nodes, uint64_t epoch,
                             std::set<std::string> suspects) {
  if (index_ && epoch_ == epoch && suspects == suspects_) return;
  std::vector<NodeInfo> infos;
  infos.reserve(nodes.size());
  by_name_.clear();
  for (const auto& n : nodes) {
    infos.push_back(NodeInfoFromProto(n));
    if (suspects.count(n.name()) || n.spare()) infos.back().schedulable = false;
    by_name_[n.name()] = &n;
  }
  index_.emplace(std::move(infos));
  epoch_ = epoch;
  suspects_ = std::move(suspects);
}

}  // namespace tessera::scheduler
