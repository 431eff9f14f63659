#include "scheduler/placement/quota_fit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/placement/capacity_index.h"
#include "scheduler/placement/quota_ledger.h"
#include "scheduler/placement/request_shape.h"

namespace tessera::scheduler {

absl::Status ValidateQuotaFits(const ResourceRequest& request, const std::string& team,
                               bool preemptible, const std::vector<NodeInfo>& nodes,
                               const std::vector<TeamQuota>& quotas) {
  if (preemptible || request.gpus == 0 || quotas.empty()) return absl::OkStatus();
  const CapacityIndex capacity(nodes);
  const QuotaLedger ledger(quotas, capacity);
  // The largest quota the run could use, over the pools its request fits (nothing is charged:
  // this is the team's whole quota).
  int largest = -1;
  std::string where;
  for (uint32_t pool : capacity.PoolsFor(request.cluster, request.gpu_type)) {
    const CapacityIndex::Pool& p = capacity.pool(pool);
    Shape shape;
    if (p.gpus_per_node == 0 || ShapeFor(request, p.gpus_per_node, &shape) != ShapeError::kNone) {
      continue;
    }
    const int headroom = ledger.Headroom(team, pool);
    if (headroom >= request.gpus) return absl::OkStatus();
    if (headroom > largest) {
      largest = headroom;
      where = absl::StrCat("cluster ", p.cluster, p.gpu_type.empty() ? "" : " (", p.gpu_type,
                           p.gpu_type.empty() ? "" : ")");
    }
  }
  if (largest < 0) return absl::OkStatus();  // no pool fits at all: ValidateFits says why
  return absl::InvalidArgumentError(absl::StrCat(
      "compute.gpus: ", request.gpus, " GPUs can never start for ",
      team.empty() ? std::string("a user in no team") : absl::StrCat("team ", team),
      ": its quota in ", where, " is ", largest,
      " GPUs, and a run that is not preemptible may not borrow beyond it (set "
      "scheduling.preemptible: true to borrow idle GPUs, or ask an admin for a larger quota)"));
}

}  // namespace tessera::scheduler
