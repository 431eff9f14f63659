#pragma once
// What the run manager tells Prometheus as runs change: runs that ended, by status; and each
// recovery (an attempt that runs after an earlier one of its run ended), by the cause that ended
// the earlier one, with the time from that end to the new attempt's running (a histogram).
// Labels are statuses and causes: bounded. The exceptions, tessera_run_goodput_ratio{run} and
// tessera_run_resumptions{run}, have a series per running run only, dropped when the run stops
// running. tessera_cluster_goodput_ratio is the running runs' goodput weighted by their GPUs (the
// cluster's effective training time ratio, ETTR), absent while no run is running.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tessera/v1/runs.pb.h"
#include "transport/metrics/registry.h"

namespace tessera::runs {

class LifecycleMetrics {
 public:
  // Registers its families in `registry` (which outlives it).
  explicit LifecycleMetrics(metrics::Registry& registry);

  // A run moved from `before` to `after` (committed); `attempts` are its attempts as read with
  // `before`.
  void Observe(const v1::Run& before, const v1::Run& after,
               const std::vector<v1::Attempt>& attempts, absl::Time now);

  // What each running run's series show, by run name: its goodput (effective training time over
  // wall time, as `mcli describe run` shows it) and how often it was resumed so far.
  struct RunningRun {
    double goodput = 0;
    int resumptions = 0;
  };
  // Sets the series of every running run; those of runs not in `by_name` are dropped.
  void SetRunningRuns(const std::map<std::string, RunningRun>& by_name);
  // The running runs' GPU-weighted goodput; nullopt (no run running) drops the series.
  void SetClusterGoodput(std::optional<double> goodput);

 private:
  metrics::Family<metrics::Counter>* ended_;
  metrics::Family<metrics::Counter>* recoveries_;
  metrics::Family<metrics::Histogram>* recovery_seconds_;
  metrics::Family<metrics::Gauge>* goodput_;
  metrics::Family<metrics::Gauge>* resumptions_;
  metrics::Family<metrics::Gauge>* cluster_goodput_;
};

}  // namespace tessera::runs
