#pragma once
// `mcli describe run`: the run with its attempts, events, interruptions and goodput.

#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "services/store/progress_point.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

// Interruptions are the attempts that ended without finishing the run (node failure, GPU
// fault, hang, straggler, preemption, a fault of Tessera's).
//
// With progress reports (`progress`: the attempts' history, by attempt then step), the time an
// interruption lost runs from the last report before it to the moment the next attempt was back
// at that step, in four parts: detection (to the attempt's end), downtime (to the next start),
// restart (to its first step) and rework (the steps trained again); the effective training time
// is the steps the run kept times its median seconds per step, so a slow stretch, a fault's
// detection and a restart all show in goodput as they do in a stopwatch's.
//
// Without reports (a command that is not tessera-train), the time lost is the interrupted
// attempt's running time whose progress was not kept (from the checkpoint the next attempt
// resumed from; all of it when no step information exists) plus the time until the next attempt
// ran again, and the effective time is the attempts' running time less that. Goodput is the
// effective training time over the run's wall time (created to ended, or now).
v1::RunDescription Describe(const v1::Run& run, const std::vector<v1::Attempt>& attempts,
                            const std::vector<v1::RunEvent>& events,
                            const std::vector<store::ProgressPoint>& progress, absl::Time now);

// How often the cluster's hardware interrupts its attempts (cluster_reliability.h reads them).
struct ReliabilityFigures {
  int interruptions = 0;  // node failures, GPU faults, hangs, stragglers in the window
  double gpu_hours = 0;   // the attempts' GPU-hours in the window
  double window_days = 0;
};

// The checkpoint interval that loses least for a run whose progress reports its checkpoints'
// cost and interval, `step_seconds` a step on `gpus` GPUs, on a cluster with `figures`
// (CheckpointAdvice in runs.proto). nullopt where something it needs is unknown: no checkpoints,
// no save measured yet, no pace, no GPU-hours in the window.
std::optional<v1::CheckpointAdvice> AdviseCheckpointInterval(const v1::RunProgress& progress,
                                                             double step_seconds, int gpus,
                                                             const ReliabilityFigures& figures);

}  // namespace tessera::runs
