#pragma once
// A node of cluster "c" with 8 GPUs of `gpu_type`, online and schedulable, a hot spare or not:
// the nodes the spare tests (spare_nodes_test.cc, spare_placement_test.cc) build their pools of.

#include <string>

#include "tessera/v1/nodes.pb.h"

namespace tessera::scheduler {

inline v1::Node SpareTestNode(const std::string& name, const std::string& gpu_type,
                              bool spare = false) {
  v1::Node n;
  n.set_name(name);
  n.set_cluster("c");
  n.set_gpu_type(gpu_type);
  n.set_gpu_count(8);
  n.set_liveness(v1::NODE_LIVENESS_ONLINE);
  n.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
  n.set_spare(spare);
  return n;
}

}  // namespace tessera::scheduler
