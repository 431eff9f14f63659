#pragma once
// The node events the scheduler writes (registered, recovered, lost, cordoned for flapping).

#include <string>

#include "absl/time/time.h"
#include "base/timestamps.h"
#include "tessera/v1/cordon.pb.h"

namespace tessera::scheduler {

inline v1::NodeEvent SchedulerNodeEvent(const std::string& node, v1::NodeEventType type,
                                        std::string reason, absl::Time now) {
  v1::NodeEvent e;
  e.set_node_name(node);
  e.set_type(type);
  *e.mutable_time() = ToProtoTime(now);
  e.mutable_actor()->set_kind(v1::ACTOR_KIND_SYSTEM);
  e.mutable_actor()->set_name("scheduler");
  e.set_reason(std::move(reason));
  return e;
}

}  // namespace tessera::scheduler
