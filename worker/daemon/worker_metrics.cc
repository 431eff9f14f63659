#include "worker/daemon/worker_metrics.h"

#include <string>

#include "transport/metrics/labels.h"
#include "transport/metrics/must_register.h"

namespace tessera::worker {

RankExitCause ClassifyRankExit(const ExitInfo& exit, bool stopped, bool fenced,
                               bool out_of_memory) {
  if (exit.status_lost) return RankExitCause::kLost;
  if (fenced && exit.signaled()) return RankExitCause::kFenced;
  if (out_of_memory) return RankExitCause::kOutOfMemory;
  // A rank that handles SIGTERM may exit with any status: it was still stopped.
  if (stopped) return RankExitCause::kStopped;
  if (exit.signaled()) return RankExitCause::kSignaled;
  return exit.exit_code == 0 ? RankExitCause::kSucceeded : RankExitCause::kFailed;
}

std::string_view RankExitCauseLabel(RankExitCause cause) {
  switch (cause) {
    case RankExitCause::kSucceeded:
      return "succeeded";
    case RankExitCause::kFailed:
      return "failed";
    case RankExitCause::kOutOfMemory:
      return "out_of_memory";
    case RankExitCause::kSignaled:
      return "signaled";
    case RankExitCause::kStopped:
      return "stopped";
    case RankExitCause::kFenced:
      return "fenced";
    case RankExitCause::kLost:
      return "lost";
  }
  return "lost";
}

WorkerEventMetrics::WorkerEventMetrics(metrics::Registry& registry)
    : rank_starts_(&metrics::MustRegister(registry.AddCounter("tessera_worker_rank_starts_total",
                                                              "Rank processes started"))
                        ->WithLabels()),
      rank_exits_(metrics::MustRegister(registry.AddCounter(
          "tessera_worker_rank_exits_total", "Rank processes that exited, by cause", {"cause"}))),
      gpu_probes_(&metrics::MustRegister(
                       registry.AddCounter("tessera_worker_gpu_probes_total",
                                           "GPU health probes taken (NVML, or simulated GPUs)"))
                       ->WithLabels()),
      gpu_faults_(metrics::MustRegister(registry.AddCounter(
          "tessera_worker_gpu_faults_total", "GPU faults the probes found, by kind", {"kind"}))) {}

WorkerEventMetrics& WorkerEventMetrics::Default() {
  static WorkerEventMetrics* metrics = new WorkerEventMetrics(metrics::Registry::Default());
  return *metrics;
}

void WorkerEventMetrics::RankStarted() { rank_starts_->Increment(); }

void WorkerEventMetrics::RankExited(RankExitCause cause) {
  rank_exits_->WithLabels({RankExitCauseLabel(cause)}).Increment();
}

void WorkerEventMetrics::GpuProbed() { gpu_probes_->Increment(); }

void WorkerEventMetrics::GpuFault(v1::GpuFaultKind kind) {
  const std::string label = metrics::EnumLabel(v1::GpuFaultKind_Name(kind), "GPU_FAULT_KIND_");
  gpu_faults_->WithLabels({label}).Increment();
}

}  // namespace tessera::worker
