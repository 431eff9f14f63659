#pragma once
// Rank output (owned by the log service): every line of every rank's stdout and stderr, keyed by
// (run, resumption, rank, stream, sequence). Sequences count from 0 per key with no gaps, so a
// resent line is recognised and not stored twice, and a reader can tell a missing line. A line
// with dropped_lines > 0 is the log service's marker for lines it dropped (a run over its log
// quota): it stands for the sequences FirstSequence(line)..sequence, so those are no gap.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/store/log_fanout.h"
#include "tessera/v1/logs.pb.h"

namespace tessera::store {

// (rank, stream) inside one attempt.
using LogStreamKey = std::pair<int32_t, int32_t>;

// What is stored for one (run, resumption, rank, stream).
struct LogStreamInfo {
  std::string run_id;
  int32_t resumption_index = 0;
  int32_t rank = 0;
  v1::LogStream stream = v1::LOG_STREAM_UNSPECIFIED;
  int32_t node_rank = 0;
  std::string node_name;
  // Every line 0..durable_sequence is stored (-1: not line 0 yet).
  int64_t durable_sequence = -1;
  // The highest sequence stored (above durable_sequence when an earlier line is missing).
  int64_t max_sequence = -1;
};

// The first sequence a stored line stands for: its own, or a marker's first dropped line.
inline int64_t FirstSequence(const v1::LogLine& line) {
  return line.dropped_lines() > 1 ? line.sequence() - line.dropped_lines() + 1 : line.sequence();
}

struct LogAppendResult {
  // One per (run, resumption, rank, stream) in the batch, in the order of first appearance.
  std::vector<LogStreamInfo> watermarks;
  // Lines stored by this call (resent lines are not counted).
  int64_t inserted = 0;
};

struct LogQuery {
  std::string run_id = {};
  int32_t resumption_index = 0;
  std::optional<int32_t> rank = std::nullopt;
  std::optional<int32_t> node_rank = std::nullopt;
  // Per (rank, stream): the first sequence wanted (lines below it are skipped; absent: 0).
  std::map<LogStreamKey, int64_t> from_sequence = {};
  // At most this many lines per (rank, stream), the lowest sequences (0: no limit).
  int limit_per_stream = 0;
};

class LogStore {
 public:
  virtual ~LogStore() = default;

  // Stores the batch's lines, plain and packed, in one transaction, skipping any already stored
  // (same key and sequence), and returns the watermark of every key in the batch (the plain
  // lines' first, then the packed groups', each in order of first appearance). The batch is
  // taken over (once committed it goes to this process's followers, log_fanout.h), not copied.
  virtual absl::StatusOr<LogAppendResult> AppendLogBatch(LogBatchToStore batch) = 0;
  // Plain lines only.
  absl::StatusOr<LogAppendResult> AppendLogs(std::vector<v1::LogLine> lines) {
    return AppendLogBatch({.lines = std::move(lines)});
  }

  // The lines of one attempt that this store commits from now on, handed over in memory
  // (log_fanout.h): a follower that has caught up takes them instead of reading again.
  virtual std::unique_ptr<LogSubscription> SubscribeLogs(const std::string& run_id,
                                                         int32_t resumption_index) = 0;

  // Lines of one attempt matching the query, ordered by (time, rank, stream, sequence).
  virtual absl::StatusOr<std::vector<v1::LogLine>> ReadLogs(const LogQuery& query) = 0;

  // The last `n` lines of one attempt matching the query (from_sequence is ignored), in the same
  // order as ReadLogs.
  virtual absl::StatusOr<std::vector<v1::LogLine>> TailLogs(const LogQuery& query, int n) = 0;

  // Every (resumption, rank, stream) stored for the run, ordered by those; only those of
  // `resumption_index` when set.
  virtual absl::StatusOr<std::vector<LogStreamInfo>> ListLogStreams(
      const std::string& run_id, std::optional<int32_t> resumption_index) = 0;

  // Per (rank, stream) of one attempt, the first sequence whose line may have been printed at or
  // after `since` (a stream's lines are in time order), so that a read from a time starts there
  // instead of at line 0; a stream with no such line gets its max_sequence + 1.
  virtual absl::StatusOr<std::map<LogStreamKey, int64_t>> SequencesSince(const std::string& run_id,
                                                                         int32_t resumption_index,
                                                                         absl::Time since) = 0;

  // Removes every line of the run, and the mark of an expiry (the run is being deleted); OK
  // when there is none.
  virtual absl::Status DeleteRunLogs(const std::string& run_id) = 0;

  // Bytes of text stored for the run, every attempt (the log quota's measure).
  virtual absl::StatusOr<int64_t> RunLogBytes(const std::string& run_id) = 0;
  // Runs whose newest line was stored before `before` (candidates for the retention of
  // finished runs' logs), oldest first, at most `limit`.
  virtual absl::StatusOr<std::vector<std::string>> ListRunsIdleSince(absl::Time before,
                                                                     int limit) = 0;
  // Removes every line of the run and remembers when, for LogsExpiredAt.
  virtual absl::Status ExpireRunLogs(const std::string& run_id, absl::Time at) = 0;
  // When ExpireRunLogs removed the run's lines; nullopt when it did not.
  virtual absl::StatusOr<std::optional<absl::Time>> LogsExpiredAt(const std::string& run_id) = 0;
};

// The order of ReadLogs and TailLogs: (time, rank, stream, sequence).
bool LogLineBefore(const v1::LogLine& a, const v1::LogLine& b);

}  // namespace tessera::store
