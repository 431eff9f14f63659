#pragma once
// What the run manager tells Prometheus as runs change: runs that ended, by status; and each
// recovery (an attempt that runs after an earlier one of its run ended), by the cause that ended
// the earlier one, with the time from that end to the new attempt's running (a histogram).
// Labels are statuses and causes: bounded. The one exception, tessera_run_goodput_ratio{run},
// has a series per running run only, dropped when the run stops running.

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "services/common/metrics/registry.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

class LifecycleMetrics {
 public:
  // Registers its families in `registry` (which outlives it).
  explicit LifecycleMetrics(metrics::Registry& registry);

  // A run moved from `before` to `after` (committed); `attempts` are its attempts as read with
  // `before`.
  void Observe(const v1::Run& before, const v1::Run& after,
               const std::vector<v1::Attempt>& attempts, absl::Time now);

  // Goodput (effective training time over wall time, as `mcli describe run` shows it) of every
  // running run, by name; the series of runs not in `by_run` are dropped.
  void SetGoodput(const std::map<std::string, double>& by_run);

 private:
  metrics::Family<metrics::Counter>* ended_;
  metrics::Family<metrics::Counter>* recoveries_;
  metrics::Family<metrics::Histogram>* recovery_seconds_;
  metrics::Family<metrics::Gauge>* goodput_;
};

}  // namespace tessera::runs
