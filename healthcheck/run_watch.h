#pragma once
// Watching running runs for signs of a bad node, from the progress their ranks report:
//   MFU drop   the run's MFU stayed under its scheduling.mfu_threshold for `mfu_reports`
//              consecutive reports
//   straggler  one node's compute time per step (forward and backward, without waiting for the
//              others) stayed above straggler_factor times the median of the run's other nodes
//              for `straggler_reports` consecutive reports
// Either starts a sweep of the run's nodes (and idle peers), which confirms the bad node before
// anything is cordoned; then the run is left alone for `rearm_reports` reports.

#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "tessera/v1/health.pb.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::health {

struct RunWatchConfig {
  int mfu_reports = 3;
  double straggler_factor = 1.5;
  int straggler_reports = 3;
  // After a trigger, the run is watched again after this many reports (a sweep that found
  // nothing does not silence a run that stays slow). A shorter rest finds a fault that follows a
  // trigger by noise sooner, but each sweep of a busy run's nodes is another chance for today's
  // verdicts to condemn a healthy one (issue 47): the rest stays long until they cannot.
  int rearm_reports = 30;
};

struct SweepTriggerEvent {
  v1::SweepTrigger trigger = v1::SWEEP_TRIGGER_UNSPECIFIED;
  std::string run_name;
  std::string suspect_node;  // the straggler; empty for an MFU drop
  std::string reason;        // "MFU 3.1% under its threshold 6.0% for 3 reports"
};

// `node`'s compute time per step in `run`'s newest report over the median of the run's other
// nodes'; 0 when the report has no figure for it or for the others.
double StragglerRatio(const v1::Run& run, const std::string& node);

class RunWatch {
 public:
  explicit RunWatch(RunWatchConfig config) : config_(config) {}
  // Feeds a RUNNING run as the run manager has it now; a new report (a later reported_at)
  // counts once. Returns a trigger when one is due.
  std::optional<SweepTriggerEvent> Observe(const v1::Run& run);
  // Forgets runs that are no longer running.
  void Retain(const std::set<std::string>& running_run_ids);

 private:
  struct State {
    int resumption = -1;
    int64_t last_report_nanos = 0;
    int low_mfu = 0;
    std::map<std::string, int> straggling;  // node -> consecutive reports
    int quiet_reports = 0;                  // reports still to ignore after a trigger
  };
  RunWatchConfig config_;
  std::map<std::string, State> runs_;
};

}  // namespace tessera::health
