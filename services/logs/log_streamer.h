#pragma once
// One GetLogs or StreamLogs call's work, in steps that never wait: each step reads at most a
// page (or a tail) and hands it to the call's sinks, then says what comes next (StreamStep):
// another step, a wait (for lines to commit, or until the fallback poll), or the end with its
// status. A blocking
// caller waits in between (LogHandler::GetLogs); the log service's StreamLogs waits in a
// StreamPump (stream_pump.h) instead, so an open follow holds no thread.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/policy/log_cursor.h"
#include "services/common/pumped_stream.h"
#include "services/logs/line_filter.h"
#include "services/logs/log_reader.h"
#include "services/store/log_store.h"
#include "tessera/v1/logs.pb.h"

namespace tessera::logs {

class LogHandler;

// Where a call's lines come from: one attempt of one run, maybe one rank or node rank.
struct LogTarget {
  std::string run_name;
  int32_t resumption = 0;
  store::LogQuery query;
  // "run NAME attempt N (rank R)", for messages.
  std::string what;
};

// Where a step sends what it read (log_handler.h says what each sink means); any but `send` may
// be null. A sink that returns false: the reader went away (the call ends, OK).
struct LogSinks {
  std::function<bool(const v1::LogLine&)> send;
  std::function<bool()> flush;
  std::function<bool(const v1::PackedLogLines&, absl::string_view, int64_t)> send_packed;
  std::function<bool(const v1::LogCursor&)> send_start;
};

class LogStreamer {
 public:
  ~LogStreamer();
  LogStreamer(const LogStreamer&) = delete;
  LogStreamer& operator=(const LogStreamer&) = delete;

  // One step. `done`: whether the caller went away (checked inside a step that reads many
  // pages; the caller checks it between steps).
  StreamStep Step(const std::function<bool()>& done);

  // For a caller that waits in a StreamPump of Wakes::kForeignChanges: a wait's `seen` is then
  // the lines' foreign generation, and the follow's own news comes through WakeOnNews, which the
  // caller calls at each wait: a follow is woken by its own attempt's lines, not every run's.
  void UseNewsWakes() { news_wakes_ = true; }
  void WakeOnNews(std::function<void()> wake) { reader_.WakeOnNews(std::move(wake)); }

 private:
  friend class LogHandler;
  enum class Phase { kBegin, kReadAll, kFollow };

  LogStreamer(LogHandler& handler, const v1::GetLogsRequest& req, LineFilter filter,
              std::optional<LogCursorPositions> resume, LogTarget target, LogSinks sinks);

  StreamStep Begin(const std::function<bool()>& done);
  StreamStep ReadAll();
  StreamStep FollowOnce();
  // The line through the filter to `send`.
  bool Send(const v1::LogLine& line) { return !filter_.Matches(line) || sinks_.send(line); }
  bool Flushed() { return sinks_.flush == nullptr || sinks_.flush(); }

  LogHandler& h_;
  const v1::GetLogsRequest req_;
  LineFilter filter_;
  std::optional<LogCursorPositions> resume_;
  LogTarget t_;
  LogSinks sinks_;
  LogReader reader_;
  Phase phase_ = Phase::kBegin;
  bool news_wakes_ = false;
  // Following (counted in the handler's followers gauge while true).
  bool following_ = false;
  std::optional<absl::Time> ended_at_;
  absl::Time last_check_ = absl::InfinitePast();
  // When the last line came: after the attempt ended, lines still arriving (a worker shipping
  // its backlog) keep the follow going; end_grace counts from the later of the two.
  absl::Time last_line_at_ = absl::InfinitePast();
};

}  // namespace tessera::logs
