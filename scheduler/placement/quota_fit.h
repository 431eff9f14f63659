#pragma once
// Submit-time check of a run against its team's quotas: a run that is not preemptible may not
// borrow, so one larger than every quota that would apply to it can never start. Errors are
// INVALID_ARGUMENT starting with the field ("compute.gpus: ...") and say what to change.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/placement/types.h"

namespace tessera::scheduler {

absl::Status ValidateQuotaFits(const ResourceRequest& request, const std::string& team,
                               bool preemptible, const std::vector<NodeInfo>& nodes,
                               const std::vector<TeamQuota>& quotas);

}  // namespace tessera::scheduler
