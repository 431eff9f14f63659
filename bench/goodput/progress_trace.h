#pragma once
// A run's progress over time, as the API reports it: a thread asks GetRun every 100 ms and keeps
// (time, step, resumption, status, nodes). Calls that fail while a fault is on are skipped; the
// samples after it tell what the run did meanwhile. Also the figures bench_goodput derives from
// two traces and the times of the faults: each fault's cost, the noise floor, goodput.

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/goodput/split_cluster.h"

namespace tessera::bench {

struct ProgressSample {
  absl::Time t;
  int64_t step = 0;
  int resumption = -1;
  v1::RunStatus status = v1::RUN_STATUS_UNSPECIFIED;
  std::vector<std::string> nodes;  // of the current (or last) attempt
};

class ProgressTrace {
 public:
  ProgressTrace(SplitCluster& cluster, std::string run);
  ~ProgressTrace();

  absl::Status WaitForEnd(absl::Duration timeout);
  void WaitForStep(int64_t step, absl::Duration timeout);
  bool Finished() const { return finished_; }
  bool Completed() const;
  ProgressSample Latest() const;
  std::vector<ProgressSample> Samples() const;

  // The first sample that showed a step (training began) and the first that showed the last
  // step; the steps per second between them.
  absl::Time start() const;
  absl::Time end() const;
  double TrainingSeconds() const { return absl::ToDoubleSeconds(end() - start()); }
  double StepsPerSecond() const;
  // The step the run had reached at `t` (the latest sample at or before it).
  int64_t StepAt(absl::Time t) const;
  // Whether the step moved in the last `d`: an attempt is training.
  bool AdvancedWithin(absl::Duration d) const { return Latest().step > StepAt(absl::Now() - d); }

 private:
  void Poll();

  SplitCluster& cluster_;
  const std::string run_;
  mutable std::mutex mu_;
  std::vector<ProgressSample> samples_;
  std::atomic<bool> finished_{false}, stop_{false};
  std::thread poller_;
};

struct FaultWindow {
  std::string kind, target;
  absl::Time at;
};

struct FaultCost {
  FaultWindow fault;
  double window_s = 0, cost_s = 0;
  // Node faults: seconds from the fault until the run's attempt ended (-1: it did not) and until
  // the next attempt reported a step; steps computed again.
  double detect_s = -1, back_s = -1;
  int64_t recomputed = 0;
};

struct Report {
  std::vector<FaultCost> costs;
  double rate = 0;
  int steps = 0;
  double calm_s = 0, chaos_s = 0;
  // The cost of the undisturbed run's own windows (the same gaps): what "0" measures as.
  double noise_mean_s = 0, noise_sd_s = 0, noise_max_s = 0;
  int noise_windows = 0;
};

Report Summarize(const ProgressTrace& calm, const ProgressTrace& chaos,
                 const std::vector<FaultWindow>& faults, double rate, double min_gap,
                 double max_gap);
void PrintReport(const Report& report);
// What the run itself recorded: its interruptions with cause and time lost, its counters.
void PrintRunRecord(SplitCluster& cluster, const std::string& run);

}  // namespace tessera::bench
