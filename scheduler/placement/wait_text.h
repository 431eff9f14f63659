#pragma once
// Why a queued run waits, in words people act on: "waiting for 16 GPUs of type h100 in cluster
// c1 (8 free)", "team quota reached (64/64 GPUs of team vision in cluster c1; non-preemptible
// runs may not borrow)".

#include <string>

#include "scheduler/placement/placer.h"
#include "scheduler/placement/types.h"

namespace tessera::scheduler {

// `placer` is the one whose PlaceQueue decided `waiting` (its state after the cycle);
// `reserved_for` names the run holding the reservation that blocks it, as the reader may see
// it ("run big-a1b2", "another user's run"; empty: "a run ahead of it").
std::string DescribeWaiting(const Waiting& waiting, const QueuedRun& run, const Placer& placer,
                            const std::string& reserved_for = "");

}  // namespace tessera::scheduler
