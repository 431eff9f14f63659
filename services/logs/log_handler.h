#pragma once
// The log service: workers push every line of every rank's output (PushLogs); it is stored
// durably, acknowledged with per-stream watermarks, and shown to users filtered, tailed or
// followed live (GetLogs). Every dependency comes through the constructor; the gRPC adapter
// (log_service.h) only authenticates and forwards.

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/logs/log_quota.h"
#include "services/logs/log_streamer.h"
#include "services/logs/node_placements.h"
#include "services/logs/run_lookup.h"
#include "services/store/change_feed.h"
#include "services/store/log_store.h"
#include "tessera/v1/logs.pb.h"
#include "transport/metrics/registry.h"

namespace tessera::logs {

struct LogHandlerOptions {
  // How often a follower reads the store when it heard of no commit (the change feed wakes it
  // at once for one; this is the fallback while the feed's notifications may be lost, and after
  // the attempt ended; while the feed hears every commit, a follower looks again only for its
  // run check).
  absl::Duration poll_interval = absl::Milliseconds(250);
  // How often a follower asks the run manager whether its attempt has ended.
  absl::Duration run_check_interval = absl::Seconds(1);
  // After its attempt ends, a follower keeps reading until no line arrived for this long, for
  // the workers' last batches.
  absl::Duration end_grace = absl::Seconds(2);
  // A follower waits this long for a missing line before going on without it.
  absl::Duration gap_timeout = absl::Seconds(30);
  // Lines of context shown before a first exception.
  int exception_context_lines = 5;
  // Per-run rate and total (log_quota.h).
  LogQuotaOptions quota{};
  // The logs of a run that ended are removed once no line arrived for this long (ExpireOldLogs);
  // zero: kept until the run is deleted.
  absl::Duration retention = absl::ZeroDuration();
};

// Where GetLogs sends each line (it may be shared with other followers: a sink copies what it
// keeps). False: the reader went away.
using LineSink = std::function<bool(const v1::LogLine&)>;
// Where a follow sends lines that are already packed, when the caller sends them so: `count`
// lines of `group`'s stream, encoded (`lines`, a slice of the group's). False: the reader went
// away.
using PackedSink =
    std::function<bool(const v1::PackedLogLines& group, absl::string_view lines, int64_t count)>;
// Where a follow says where its streams start (LogLines.start). False: the reader went away.
using StartSink = std::function<bool(const v1::LogCursor& start)>;

class LogHandler {
 public:
  // `changes`: the store's change feed (a follower wakes when lines commit in any process);
  // null: a feed of this process's own pushes only.
  LogHandler(std::shared_ptr<store::LogStore> logs, std::shared_ptr<RunLookup> runs,
             std::shared_ptr<Clock> clock, LogHandlerOptions options = {},
             metrics::Registry& registry = metrics::Registry::Default(),
             std::shared_ptr<store::ChangeFeed> changes = nullptr);

  using Who = auth::Principal;
  // Stores one batch in one transaction and acknowledges it; then wakes the followers. A node
  // key pushes only as its node, and its lines of attempts not placed on it are acknowledged but
  // not stored. INVALID_ARGUMENT naming the field for a malformed batch.
  absl::Status PushBatch(const Who& who, v1::LogBatch batch, v1::LogAck* ack);
  // Sends the requested lines; with `follow`, then new lines as they arrive until the attempt
  // has ended and everything stored was sent, `send` returns false or `done()`. `send` may
  // gather lines to write several at once (taking them over): `flush` (when given) writes what it
  // holds, and is called whenever no more lines are at hand (before a follower waits); the caller
  // flushes once more after the call.
  // `send_packed` (when given): a follow without since, until or grep sends the packed lines
  // the fan-out hands over through it, as they are, instead of one by one through `send`.
  // `send_start` (when given): before following, where each stream goes on from when that is
  // not every stream's first line (after a tail, from `since`), for a client's cursor.
  // `req.resume` goes on from a cursor (log_cursor.h): every line after it, none before.
  // Waits on the calling thread between its steps (LogStreamer).
  absl::Status GetLogs(const Who& who, const v1::GetLogsRequest& req, const LineSink& send,
                       const std::function<bool()>& done,
                       const std::function<bool()>& flush = nullptr,
                       const PackedSink& send_packed = nullptr,
                       const StartSink& send_start = nullptr);
  // The same call as steps for a caller that waits elsewhere (the log service's StreamLogs, in
  // a StreamPump on the change feed's kLogs topic): the request is checked and its run found
  // here; each LogStreamer::Step then reads and sends. Errors as GetLogs's.
  absl::StatusOr<std::unique_ptr<LogStreamer>> OpenStream(const Who& who,
                                                          const v1::GetLogsRequest& req,
                                                          LogSinks sinks);
  // What a caller of OpenStream waits on.
  const std::shared_ptr<store::ChangeFeed>& change_feed() const { return changes_; }
  const std::shared_ptr<Clock>& clock() const { return clock_; }
  // Removes every line of a run (admins and system keys); OK when there is none.
  absl::Status DeleteRunLogs(const Who& who, const v1::DeleteRunLogsRequest& req,
                             v1::DeleteRunLogsResponse* resp);

  // Checks a batch without storing it.
  static absl::Status ValidateBatch(const v1::LogBatch& batch);

  // Removes the logs of runs that ended more than `retention` ago and printed nothing since
  // (log_retention.cc); the log service calls it now and then. Returns how many runs' logs went.
  absl::StatusOr<int> ExpireOldLogs();

 private:
  friend class LogStreamer;
  absl::StatusOr<LogTarget> Resolve(const Who& who, const v1::GetLogsRequest& req);
  absl::Status SendFirstException(const LogTarget& t, const LineSink& send);

  std::shared_ptr<store::LogStore> logs_;
  std::shared_ptr<RunLookup> runs_;
  // What the follows' checks of whether their attempt ended ask: runs_, each answer shared by the
  // follows of a run for half a check interval.
  SharedRunLookup run_checks_;
  std::shared_ptr<Clock> clock_;
  LogHandlerOptions options_;
  std::shared_ptr<store::ChangeFeed> changes_;
  NodePlacements placements_;
  LogQuota quota_;
  metrics::Counter* lines_;
  metrics::Counter* refused_lines_;
  metrics::Counter* duplicate_lines_;
  metrics::Counter* dropped_over_rate_;
  metrics::Counter* dropped_over_total_;
  metrics::Counter* batches_;
  metrics::Counter* bytes_;
  metrics::Gauge* followers_;
  // For each page a follower of a running attempt sends: from its newest line's print time
  // (the node's clock) to the send.
  metrics::Histogram* follower_lag_;
};

}  // namespace tessera::logs
