#include "services/logs/log_handler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <iterator>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "proto/policy/log_cursor.h"
#include "proto/policy/packed_log_lines.h"
#include "proto/policy/run_status.h"
#include "services/common/rpc.h"
#include "services/logs/first_exception.h"
#include "services/logs/line_filter.h"
#include "services/logs/log_reader.h"
#include "transport/metrics/must_register.h"

namespace tessera::logs {
namespace {

template <typename T>
T* Metric(absl::StatusOr<metrics::Family<T>*> family, const char* name) {
  if (family.ok()) return &(*family)->WithLabels({});
  spdlog::error("metric {}: {}", name, std::string(family.status().message()));
  static T detached;
  return &detached;
}

// The first rank that failed in the attempt, if one did.
std::optional<int32_t> FirstFailedRank(const v1::Attempt& a) {
  if (!a.first_failed_node().empty() || a.first_failed_rank() > 0) return a.first_failed_rank();
  for (const auto& exit : a.rank_exits()) {
    if (exit.exit_code() != 0 || exit.signal() != 0) return exit.rank();
  }
  return std::nullopt;
}

}  // namespace

LogHandler::LogHandler(std::shared_ptr<store::LogStore> logs, std::shared_ptr<RunLookup> runs,
                       std::shared_ptr<Clock> clock, LogHandlerOptions options,
                       metrics::Registry& registry, std::shared_ptr<store::ChangeFeed> changes)
    : logs_(std::move(logs)),
      runs_(std::move(runs)),
      run_checks_(runs_, clock, options.run_check_interval / 2),  // before clock is moved
      clock_(std::move(clock)),
      options_(options),
      changes_(changes ? std::move(changes) : std::make_shared<store::ChangeFeed>()),
      placements_(runs_),
      quota_(options.quota, clock_,
             [logs = logs_](const std::string& run_id) { return logs->RunLogBytes(run_id); }),
      lines_(Metric(registry.AddCounter("tessera_logs_lines_ingested_total",
                                        "Log lines stored (resent lines not counted)."),
                    "lines")),
      refused_lines_(
          Metric(registry.AddCounter("tessera_logs_lines_refused_total",
                                     "Log lines a node pushed for attempts not placed on it."),
                 "refused")),
      duplicate_lines_(Metric(registry.AddCounter("tessera_logs_duplicate_lines_total",
                                                  "Resent log lines that were already stored."),
                              "duplicates")),
      dropped_over_rate_(
          Metric(registry.AddCounter("tessera_logs_lines_dropped_over_rate_total",
                                     "Log lines dropped: their run printed over its rate quota."),
                 "over rate")),
      dropped_over_total_(
          Metric(registry.AddCounter("tessera_logs_lines_dropped_over_quota_total",
                                     "Log lines dropped: their run's logs reached their quota."),
                 "over quota")),
      batches_(Metric(
          registry.AddCounter("tessera_logs_batches_total", "Log batches stored and acknowledged."),
          "batches")),
      bytes_(Metric(registry.AddCounter("tessera_logs_bytes_ingested_total",
                                        "Bytes of log text received in stored batches."),
                    "bytes")),
      followers_(Metric(registry.AddGauge("tessera_logs_followers", "GetLogs calls following."),
                        "followers")),
      follower_lag_(&metrics::MustRegister(
                         registry.AddHistogram(
                             "tessera_logs_follower_lag_seconds",
                             "Seconds from a line's printing to a follower of its running attempt "
                             "sending it (the newest line of each page sent).",
                             {}, {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}))
                         ->WithLabels()) {}

namespace {

// The fields a line and a packed group share; `bad` makes the error naming one.
template <typename Lines, typename Bad>
absl::Status ValidateStreamFields(const Lines& l, const Bad& bad) {
  if (l.run_id().empty()) return bad("run_id", "required");
  if (l.resumption_index() < 0) return bad("resumption_index", "must not be negative");
  if (l.rank() < 0) return bad("rank", "must not be negative");
  if (l.node_rank() < 0) return bad("node_rank", "must not be negative");
  if (l.stream() != v1::LOG_STREAM_STDOUT && l.stream() != v1::LOG_STREAM_STDERR) {
    return bad("stream", absl::StrCat("unknown stream ", l.stream(),
                                      " (LOG_STREAM_STDOUT or LOG_STREAM_STDERR)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LogHandler::ValidateBatch(const v1::LogBatch& batch) {
  for (int i = 0; i < batch.lines_size(); ++i) {
    const v1::LogLine& l = batch.lines(i);
    auto bad = [&](const char* field, const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("lines[", i, "].", field, ": ", why));
    };
    TESSERA_RETURN_IF_ERROR(ValidateStreamFields(l, bad));
    if (l.sequence() < 0) return bad("sequence", "must not be negative");
  }
  for (int i = 0; i < batch.packed_size(); ++i) {
    const v1::PackedLogLines& g = batch.packed(i);
    auto bad = [&](const char* field, const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("packed[", i, "].", field, ": ", why));
    };
    TESSERA_RETURN_IF_ERROR(ValidateStreamFields(g, bad));
    int64_t negative = 0;
    const absl::Status st = ForEachPackedLine(g, [&](const ChunkLine& l) {
      if (l.sequence < 0 || l.dropped < 0) ++negative;
    });
    if (!st.ok()) return bad("lines", std::string(st.message()));
    if (negative > 0) {
      return bad("lines", absl::StrCat(negative, " line(s) with a negative sequence or count"));
    }
  }
  return absl::OkStatus();
}

absl::Status LogHandler::PushBatch(const Who& who, v1::LogBatch batch, v1::LogAck* ack) {
  if (!who.is_system() && !who.is_node()) {
    return absl::PermissionDeniedError("PushLogs is for workers' node keys");
  }
  TESSERA_RETURN_IF_ERROR(ValidateBatch(batch));
  if (who.is_node() && batch.node_name() != who.node) {
    return absl::PermissionDeniedError(absl::StrCat("this key belongs to node \"", who.node,
                                                    "\" and cannot push logs as \"",
                                                    batch.node_name(), "\""));
  }
  // What a node may not push (an impostor's lines, or a deleted run's tail) is acknowledged
  // without being stored, so the worker's shipping goes on: a watermark per refused line, or per
  // refused packed group (its last line).
  std::vector<v1::LogAck::RankWatermark> refused;
  int64_t refused_lines = 0;
  const auto refuse = [&](const auto& stream, int64_t last_sequence, int64_t count) {
    v1::LogAck::RankWatermark& w = refused.emplace_back();
    w.set_run_id(stream.run_id());
    w.set_resumption_index(stream.resumption_index());
    w.set_rank(stream.rank());
    w.set_stream(stream.stream());
    w.set_durable_sequence(last_sequence);
    refused_lines += count;
  };
  // A batch holds runs of lines of one attempt: the placement is asked once per run of them.
  std::optional<std::pair<std::string, int32_t>> asked;
  bool placed = false;
  const auto may_push = [&](const auto& stream) -> absl::StatusOr<bool> {
    if (!who.is_node()) return true;
    if (!asked || asked->first != stream.run_id() || asked->second != stream.resumption_index()) {
      TESSERA_ASSIGN_OR_RETURN(
          placed, placements_.PlacedOn(stream.run_id(), stream.resumption_index(), who.node));
      asked.emplace(stream.run_id(), stream.resumption_index());
    }
    return placed && (stream.node_name().empty() || stream.node_name() == who.node);
  };
  std::vector<v1::LogLine> lines;
  lines.reserve(batch.lines_size());
  int64_t bytes = 0;
  // The lines stored are moved out of the batch, not copied (the allocations of copies were
  // much of the service's time at full speed).
  for (v1::LogLine& line : *batch.mutable_lines()) {
    TESSERA_ASSIGN_OR_RETURN(const bool ok, may_push(line));
    if (!ok) {
      refuse(line, line.sequence(), 1);
      continue;
    }
    if (line.node_name().empty()) line.set_node_name(batch.node_name());
    bytes += static_cast<int64_t>(line.text().size());
    lines.push_back(std::move(line));
  }
  // Packed groups stay packed on their way to the store and to the followers (no message per
  // line on this path, which stores a stream's batches one after the other).
  std::vector<v1::PackedLogLines> packed;
  packed.reserve(batch.packed_size());
  for (v1::PackedLogLines& group : *batch.mutable_packed()) {
    int64_t count = 0, last = -1;
    (void)ForEachPackedLine(group, [&](const ChunkLine& l) {  // checked by ValidateBatch
      ++count;
      last = std::max(last, l.sequence);
    });
    if (count == 0) continue;
    TESSERA_ASSIGN_OR_RETURN(const bool ok, may_push(group));
    if (!ok) {
      refuse(group, last, count);
      continue;
    }
    if (group.node_name().empty()) group.set_node_name(batch.node_name());
    bytes += static_cast<int64_t>(group.lines().size()) -
             count * static_cast<int64_t>(kChunkLineHeaderBytes);
    packed.push_back(std::move(group));
  }
  if (!refused.empty()) {
    refused_lines_->Increment(static_cast<double>(refused_lines));
    spdlog::warn(
        "node {} pushed {} log lines of run {} attempt {}, which was not placed on it: "
        "not stored",
        who.node, refused_lines, refused.front().run_id(), refused.front().resumption_index());
  }
  // Over a run's quota: dropped, each stretch of a stream's dropped lines stored as one marker.
  TESSERA_ASSIGN_OR_RETURN(QuotaOutcome admitted,
                           quota_.Apply(std::move(lines), std::move(packed)));
  if (admitted.dropped_over_rate + admitted.dropped_over_total > 0) {
    dropped_over_rate_->Increment(static_cast<double>(admitted.dropped_over_rate));
    dropped_over_total_->Increment(static_cast<double>(admitted.dropped_over_total));
  }
  size_t admitted_lines = admitted.lines.size();
  for (const auto& group : admitted.packed) admitted_lines += CountChunkLines(group.lines());
  auto stored = logs_->AppendLogBatch(
      {.lines = std::move(admitted.lines), .packed = std::move(admitted.packed)});
  if (!stored.ok()) return stored.status();
  ack->set_idempotency_key(batch.idempotency_key());
  ack->set_accepts_packed(true);
  for (auto& w : refused) *ack->add_watermarks() = std::move(w);
  for (const auto& s : stored->watermarks) {
    auto* w = ack->add_watermarks();
    w->set_run_id(s.run_id);
    w->set_resumption_index(s.resumption_index);
    w->set_rank(s.rank);
    w->set_stream(s.stream);
    w->set_durable_sequence(s.durable_sequence);
  }
  batches_->Increment();
  lines_->Increment(static_cast<double>(stored->inserted));
  duplicate_lines_->Increment(static_cast<double>(admitted_lines) -
                              static_cast<double>(stored->inserted));
  bytes_->Increment(static_cast<double>(bytes));
  // Followers in this process wake at once; others hear of it from the database.
  if (stored->inserted > 0) changes_->Bump(store::ChangeTopic::kLogs);
  return absl::OkStatus();
}

absl::StatusOr<LogTarget> LogHandler::Resolve(const Who& who, const v1::GetLogsRequest& req) {
  if (req.run_name().empty()) return absl::InvalidArgumentError("run_name: required");
  if (req.tail() < 0) return absl::InvalidArgumentError("tail: must not be negative");
  if (req.previous() && req.has_resumption_index()) {
    return absl::InvalidArgumentError("previous and resumption_index: give at most one");
  }
  if (req.failed() && (req.has_rank() || req.has_node_rank())) {
    return absl::InvalidArgumentError("failed: cannot be combined with rank or node_rank");
  }
  auto desc = runs_->DescribeRun(req.run_name());
  if (!desc.ok()) return desc.status();
  const v1::Run& run = desc->run();
  if (!who.may_see(run.user())) {
    return absl::NotFoundError(absl::StrCat("run ", req.run_name(), " not found"));
  }
  auth::NoteRunRead(who, run.user());
  // Only a run that ended can have had its logs removed: a running one costs no lookup.
  std::optional<absl::Time> expired;
  if (IsTerminal(run.status())) {
    TESSERA_ASSIGN_OR_RETURN(expired, logs_->LogsExpiredAt(run.id()));
  }
  if (expired) {
    return absl::FailedPreconditionError(
        absl::StrCat("the logs of run ", run.name(), " were removed at ",
                     absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", *expired, absl::UTCTimeZone()),
                     ": the logs of finished runs are kept for the cluster's retention period"));
  }
  const int32_t latest = std::max(run.resumption_index(), 0);
  LogTarget t;
  t.run_name = run.name();
  t.resumption = latest;
  if (req.has_resumption_index() || req.has_resume()) {
    const int32_t wanted =
        req.has_resume() ? req.resume().resumption_index() : req.resumption_index();
    if (wanted < 0 || wanted > latest) {
      return absl::NotFoundError(absl::StrCat("run ", run.name(), " has no attempt ", wanted,
                                              " (its latest is ", latest, ")"));
    }
    t.resumption = wanted;
  } else if (req.previous()) {
    if (latest == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("run ", run.name(), " has no attempt before attempt 0"));
    }
    t.resumption = latest - 1;
  }
  t.query.run_id = run.id();
  t.query.resumption_index = t.resumption;
  if (req.has_rank()) t.query.rank = req.rank();
  if (req.has_node_rank()) t.query.node_rank = req.node_rank();

  // Not for a resumed follow: the run may have failed since its first request, which showed
  // every rank.
  const bool by_default = run.status() == v1::RUN_STATUS_FAILED && !req.has_rank() &&
                          !req.has_node_rank() && t.resumption == latest && !req.has_resume();
  if (req.failed() || by_default) {
    std::optional<int32_t> failed;
    for (const auto& a : desc->attempts()) {
      if (a.resumption_index() == t.resumption) failed = FirstFailedRank(a);
    }
    if (failed) {
      t.query.rank = *failed;
    } else if (req.failed()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no rank failed in attempt ", t.resumption, " of run ", run.name()));
    }
  }
  t.what = absl::StrCat("run ", run.name(), " attempt ", t.resumption);
  if (t.query.rank) absl::StrAppend(&t.what, " rank ", *t.query.rank);
  if (t.query.node_rank) absl::StrAppend(&t.what, " node rank ", *t.query.node_rank);
  return t;
}

absl::StatusOr<std::unique_ptr<LogStreamer>> LogHandler::OpenStream(const Who& who,
                                                                    const v1::GetLogsRequest& req,
                                                                    LogSinks sinks) {
  TESSERA_ASSIGN_OR_RETURN(LineFilter filter, LineFilter::FromRequest(req));
  if (req.first_exception() && !filter.empty()) {
    return absl::InvalidArgumentError(
        "first_exception: cannot be combined with since, until or grep");
  }
  TESSERA_ASSIGN_OR_RETURN(std::optional<LogCursorPositions> resume, ReadResume(req));
  TESSERA_ASSIGN_OR_RETURN(LogTarget t, Resolve(who, req));
  return std::unique_ptr<LogStreamer>(new LogStreamer(
      *this, req, std::move(filter), std::move(resume), std::move(t), std::move(sinks)));
}

absl::Status LogHandler::GetLogs(const Who& who, const v1::GetLogsRequest& req,
                                 const LineSink& send, const std::function<bool()>& done,
                                 const std::function<bool()>& flush, const PackedSink& send_packed,
                                 const StartSink& send_start) {
  TESSERA_ASSIGN_OR_RETURN(
      std::unique_ptr<LogStreamer> streamer,
      OpenStream(
          who, req,
          LogSinks{
              .send = send, .flush = flush, .send_packed = send_packed, .send_start = send_start}));
  // The first step (the tail, a follow's start) is taken whatever `done` says, as a reader that
  // asks for a tail expects it.
  for (;;) {
    const StreamStep next = streamer->Step(done);
    if (next.kind == StreamStep::Kind::kEnd) return next.status;
    if (done()) return absl::OkStatus();
    if (next.kind == StreamStep::Kind::kWait) {
      changes_->WaitForChange(store::ChangeTopic::kLogs, next.seen, next.until - clock_->Now(),
                              *clock_);
    }
  }
}

absl::Status LogHandler::SendFirstException(const LogTarget& t, const LineSink& send) {
  LogReader reader(logs_, t.query, clock_, options_.gap_timeout);
  ExceptionFinder finder(options_.exception_context_lines);
  bool complete = false;
  while (!complete) {
    auto page = reader.Next(/*skip_gaps=*/true);
    if (!page.ok()) return page.status();
    for (const v1::LogLine* l : page->lines) {
      if ((complete = finder.Add(*l))) break;
    }
    if (page->lines.empty() && !page->more) break;
  }
  auto lines = finder.Result();
  if (lines.empty())
    return absl::NotFoundError(absl::StrCat("no exception in the logs of ", t.what));
  for (auto& l : lines) {
    if (!send(l)) break;
  }
  return absl::OkStatus();
}

absl::Status LogHandler::DeleteRunLogs(const Who& who, const v1::DeleteRunLogsRequest& req,
                                       v1::DeleteRunLogsResponse*) {
  if (!who.is_admin() && !who.is_system()) {
    return absl::PermissionDeniedError("DeleteRunLogs requires an admin API key");
  }
  if (req.run_id().empty()) return absl::InvalidArgumentError("run_id: required");
  TESSERA_RETURN_IF_ERROR(logs_->DeleteRunLogs(req.run_id()));
  spdlog::info("deleted the logs of run {} for {}", req.run_id(), who.user);
  return absl::OkStatus();
}

}  // namespace tessera::logs
