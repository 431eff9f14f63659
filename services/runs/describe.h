#pragma once
// `mcli describe run`: the run with its attempts, events, interruptions and goodput.

#include <vector>

#include "absl/time/time.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

// Interruptions are the attempts that ended without finishing the run (node failure, GPU
// fault, hang, straggler, preemption). The time an interruption lost is the interrupted
// attempt's running time whose progress was not kept (from the checkpoint the next attempt
// resumed from; all of it when no step information exists) plus the time until the next attempt
// ran again. Goodput is the effective training time over the run's wall time.
v1::RunDescription Describe(const v1::Run& run, const std::vector<v1::Attempt>& attempts,
                            const std::vector<v1::RunEvent>& events, absl::Time now);

}  // namespace tessera::runs
