#include "scheduler/placement/wait_text.h"

#include "absl/strings/str_cat.h"

namespace tessera::scheduler {
namespace {

// "16 GPUs of type h100 in cluster c1", "2 nodes in any cluster", ...
std::string WhatItAsks(const ResourceRequest& request) {
  std::string what = request.gpus > 0
                         ? absl::StrCat(request.gpus, request.gpus == 1 ? " GPU" : " GPUs")
                         : absl::StrCat(request.nodes > 0 ? request.nodes : 1, " CPU node(s)");
  if (!request.gpu_type.empty()) absl::StrAppend(&what, " of type ", request.gpu_type);
  absl::StrAppend(&what, request.cluster.empty() ? " in any cluster"
                                                 : absl::StrCat(" in cluster ", request.cluster));
  return what;
}

std::string TeamName(const QueuedRun& run) {
  return run.team.empty() ? "users in no team" : absl::StrCat("team ", run.team);
}

}  // namespace

std::string DescribeWaiting(const Waiting& waiting, const QueuedRun& run, const Placer& placer,
                            const std::string& reserved_for) {
  const std::string quota =
      absl::StrCat(waiting.quota_used, "/", waiting.quota, " GPUs of ", TeamName(run), " in use");
  switch (waiting.reason) {
    case WaitReason::kWaitingForCapacity:
      return absl::StrCat("waiting for ", WhatItAsks(run.request), " (",
                          placer.FreeUnitsFor(run.request), " free)");
    case WaitReason::kQuotaReached:
      return absl::StrCat("team quota reached (", quota,
                          "; non-preemptible runs may not borrow idle GPUs)");
    case WaitReason::kWaitingToBorrow:
      return absl::StrCat("team quota reached (", quota, "): waiting to borrow idle GPUs, ",
                          placer.FreeUnitsFor(run.request), " free");
    case WaitReason::kHoldsReservation:
      return absl::StrCat("first in line for ", WhatItAsks(run.request),
                          ": nodes are reserved for it as they free up");
    case WaitReason::kNotEnoughSchedulableNodes:
      return absl::StrCat("not enough healthy, schedulable nodes for ", WhatItAsks(run.request),
                          " (others are cordoned, draining, lost or unhealthy)");
    case WaitReason::kBlockedByReservation:
      return absl::StrCat("fits now, but only on nodes reserved for ",
                          reserved_for.empty() ? "a run ahead of it" : reserved_for,
                          " (backfill: it may start only where it cannot delay that run)");
    default:
      return WaitReasonName(waiting.reason);
  }
}

}  // namespace tessera::scheduler
