#pragma once
// The workers' progress reports on their way to the run manager. A report the run manager could
// not take (it, or its database, is away) is kept and sent again, in order, once it is back: an
// outage costs a run none of its progress, not even the last report of a run that ended during
// it. Kept in this instance's memory, bounded per attempt (thinned evenly, the newest always
// kept) and in all.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "scheduler/service/runs_client.h"
#include "tessera/v1/runs.pb.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::scheduler {

struct ProgressRelayConfig {
  // How often kept reports are tried again.
  absl::Duration retry_interval = absl::Seconds(1);
  // Reports kept per attempt: past it, every second one is dropped (the history thins too).
  int max_per_attempt = 512;
  // Reports kept in all: past it, a new attempt's reports are not kept (and logged once).
  int max_total = 100'000;
};

class ProgressRelay {
 public:
  ProgressRelay(std::shared_ptr<RunsClient> runs, std::shared_ptr<Clock> clock,
                ProgressRelayConfig config = {});

  // Passes `node`'s report on, stamped with the time it arrived (progress.reported_at, which
  // the run manager keeps). While reports of its attempt wait, it waits behind them (OK: it
  // is kept); a report the run manager refuses for a reason that will not pass (a deleted run,
  // a node that does not run the attempt) is that error.
  absl::Status Relay(const std::string& node, const v1::ProgressUpdate& update);
  // Sends what is kept, oldest first per attempt, at most once per retry interval and from one
  // thread at a time; cheap when nothing is kept. Returns how many reports went.
  int RetryDue();
  // Sends the attempt's kept reports now, oldest first, waiting for a retry under way: called
  // before the attempt's end is recorded, so that a run that ended during an outage does not
  // end at an older step than its last report. OK when nothing of it is kept; the first
  // transient failure otherwise (the rest stays kept).
  absl::Status DeliverKept(const std::string& run_id, int resumption_index);

  int pending() const;

 private:
  using AttemptKey = std::pair<std::string, int>;  // run id, resumption index
  // Whether a failed report is worth keeping: the run manager or its database was away.
  static bool Transient(const absl::Status& status);
  void Keep(const AttemptKey& key, v1::ReportProgressRequest req)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends `key`'s kept reports in order until none is left (OK) or one fails transiently
  // (that failure); `sent` counts those delivered.
  absl::Status SendKept(const AttemptKey& key, int& sent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu_);

  const std::shared_ptr<RunsClient> runs_;
  const std::shared_ptr<Clock> clock_;
  const ProgressRelayConfig config_;
  // Held while kept reports are sent (RetryDue, DeliverKept): one sender at a time, so none is
  // sent twice.
  absl::Mutex send_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::map<AttemptKey, std::deque<v1::ReportProgressRequest>> kept_ ABSL_GUARDED_BY(mu_);
  int total_ ABSL_GUARDED_BY(mu_) = 0;
  bool retrying_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_retry_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool warned_full_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::scheduler
