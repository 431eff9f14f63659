#pragma once
// The cycle's nodes as its placement passes see them: a CapacityIndex with nothing allocated in
// which nothing ordinary goes to a suspect (a node that missed a beat may be dead: a run started
// there would be lost with it) or a spare (SparePlacement places on spares), and the nodes by
// name. Built again only when the nodes or the suspects changed: each cycle that places copies
// the index rather than sorting and hashing 10,000 nodes again. Used by the leader's cycle
// (SchedulingCycle), one cycle at a time: no locking.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/placement/capacity_index.h"
#include "tessera/v1/nodes.pb.h"

namespace tessera::scheduler {

class PlacementIndex {
 public:
  // `nodes` as of `epoch` (a number that changes whenever they may have), which stay where they
  // are until the next call: the index points into them. `suspects`: NodeLiveness::Suspects.
  void Refresh(const std::vector<v1::Node>& nodes, uint64_t epoch, std::set<std::string> suspects);

  // After a Refresh.
  const CapacityIndex& index() const { return *index_; }
  const std::map<std::string, const v1::Node*>& by_name() const { return by_name_; }
  // The suspects the index holds as unschedulable.
  const std::set<std::string>& suspects() const { return suspects_; }

 private:
  std::optional<CapacityIndex> index_;
  std::map<std::string, const v1::Node*> by_name_;
  uint64_t epoch_ = 0;
  std::set<std::string> suspects_;
};

}  // namespace tessera::scheduler
