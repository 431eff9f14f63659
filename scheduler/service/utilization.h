#pragma once
// mcli util: per cluster, its GPUs by state and its runs, from the same summary the leader
// publishes to Prometheus (cluster_metrics.h), so that both agree.

#include <vector>

#include "absl/time/time.h"
#include "tessera/v1/nodes.pb.h"
#include "tessera/v1/runs.pb.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::scheduler {

// `runs`: those not ended (queued and active). Clusters sorted by name; `only_cluster` (empty:
// all) keeps one.
v1::GetUtilizationResponse Utilization(const std::vector<v1::Run>& runs,
                                       const std::vector<v1::Node>& nodes, absl::Time now,
                                       const std::string& only_cluster);

}  // namespace tessera::scheduler
