#include "scheduler/placement/types.h"

namespace tessera::scheduler {

const char* PriorityName(Priority priority) {
  switch (priority) {
    case Priority::kLowest:
      return "lowest";
    case Priority::kLow:
      return "low";
    case Priority::kMedium:
      return "medium";
    case Priority::kHigh:
      return "high";
  }
  return "unknown";
}

const char* WaitReasonName(WaitReason reason) {
  switch (reason) {
    case WaitReason::kWaitingForCapacity:
      return "waiting for GPUs to free up";
    case WaitReason::kHoldsReservation:
      return "first in line: nodes are reserved for it";
    case WaitReason::kBlockedByReservation:
      return "fits only on nodes reserved for a run ahead of it";
    case WaitReason::kNotEnoughSchedulableNodes:
      return "not enough schedulable nodes (cordoned, draining, lost or unhealthy)";
    case WaitReason::kNoMatchingNodes:
      return "no nodes match the request";
    case WaitReason::kAlreadyPlaced:
      return "already placed";
    case WaitReason::kQuotaReached:
      return "team quota reached (borrowing is not allowed for non-preemptible runs)";
    case WaitReason::kWaitingToBorrow:
      return "team quota reached: waiting for idle GPUs to borrow";
  }
  return "unknown";
}

}  // namespace tessera::scheduler
