#pragma once
// Per-run log quotas, so that one run's output cannot fill the database or crowd out the others:
// a rate (bytes of text per second over all the run's ranks, with bursts) and a total (bytes
// stored for the run, every attempt). Lines over either are dropped, and each stretch of dropped
// consecutive lines of a stream in a batch becomes one marker line saying how many were dropped
// and why, which takes the sequence of the last of them (LogLine.dropped_lines): a reader sees the
// marker where the lines were, and no gap.
//
// The rate is counted by each log service instance for the batches it stores (with N instances
// a run may print up to N times the rate); the total is read from the store now and then, so all
// instances together stay within it up to what they store between two reads.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "tessera/v1/logs.pb.h"

namespace tessera::logs {

struct LogQuotaOptions {
  // Bytes of text per second per run; 0: no rate limit.
  int64_t bytes_per_second = 16 << 20;
  // Bursts of up to this many seconds' worth above the rate.
  absl::Duration burst = absl::Seconds(10);
  // Bytes of text stored per run in all; 0: no limit.
  int64_t max_bytes = int64_t{10} << 30;
  // How often a run's stored bytes are read from the store again.
  absl::Duration refresh = absl::Seconds(30);
  // A run not seen for this long is forgotten (its bucket starts full again).
  absl::Duration forget_after = absl::Minutes(10);
};

struct QuotaOutcome {
  std::vector<v1::LogLine> lines;  // to store: kept lines and markers
  // To store: packed groups kept whole (a group over a quota is taken apart into `lines`).
  std::vector<v1::PackedLogLines> packed;
  int64_t dropped_over_rate = 0;
  int64_t dropped_over_total = 0;
};

class LogQuota {
 public:
  // `stored_bytes` reads a run's stored bytes (LogStore::RunLogBytes).
  using StoredBytes = std::function<absl::StatusOr<int64_t>(const std::string& run_id)>;
  LogQuota(LogQuotaOptions options, std::shared_ptr<Clock> clock, StoredBytes stored_bytes);

  // What to store of one batch's lines (in the batch's order; a stream's lines in sequence
  // order): the plain lines, then the packed groups. The store's error when a run's stored
  // bytes cannot be read the first time.
  absl::StatusOr<QuotaOutcome> Apply(std::vector<v1::LogLine> lines,
                                     std::vector<v1::PackedLogLines> packed = {});

  const LogQuotaOptions& options() const { return options_; }

 private:
  struct RunState {
    double tokens = 0;
    absl::Time refilled;
    int64_t stored = 0;  // bytes, as of the last read plus what this instance stored since
    bool full = false;   // it reached its total: every further line is dropped
    absl::Time next_read;
    absl::Time seen;
  };
  // The run's state, its stored bytes read again when due.
  absl::StatusOr<RunState*> StateOf(const std::string& run_id, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MarkerText(int64_t dropped, bool over_total) const;

  const LogQuotaOptions options_;
  const std::shared_ptr<Clock> clock_;
  const StoredBytes stored_bytes_;
  absl::Mutex mu_;
  std::map<std::string, RunState> runs_ ABSL_GUARDED_BY(mu_);
  absl::Time next_forget_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace tessera::logs
