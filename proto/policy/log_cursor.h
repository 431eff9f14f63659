#pragma once
// A follow's cursor (v1::LogCursor): kept by a client from the lines it received (mcli), read by
// the log service to go on where a follow ended without a line twice or a line lost. Positions are
// sequences, never times: a lagging node's lines carry times before lines already shown, so a time
// cannot say what was received.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "tessera/v1/logs.pb.h"

namespace tessera {

// At most this many positions in one cursor (two streams of 50,000 ranks).
inline constexpr int kMaxLogCursorPositions = 100'000;

// (rank, stream) -> the sequence of the next line not yet received.
using LogCursorPositions = std::map<std::pair<int32_t, int32_t>, int64_t>;

// The positions of a cursor; INVALID_ARGUMENT naming the field for a negative attempt, rank or
// sequence, an unknown stream, a position given twice or too many.
absl::StatusOr<LogCursorPositions> ReadLogCursor(const v1::LogCursor& cursor);

// A request's `resume`: its positions, or none without one. INVALID_ARGUMENT for what
// ReadLogCursor refuses, and for a cursor given with tail, first_exception, previous or another
// resumption_index (the first request chose the attempt and what to skip).
absl::StatusOr<std::optional<LogCursorPositions>> ReadResume(const v1::GetLogsRequest& req);

// The cursor of `positions` in attempt `resumption`.
v1::LogCursor MakeLogCursor(int32_t resumption, const LogCursorPositions& positions);

// A cursor as one printable token, for where a message cannot carry one (a Server-Sent Event's
// id, which a browser sends back as Last-Event-ID; a query parameter): "c1." and the base64url
// of protobuf varints: the attempt, then for each position in (rank, stream) order the step from
// the previous position's key (rank * 2 + stream - 1) and its next sequence. About 4 bytes a
// position where the proto would take 10, so a follow of every rank of a 700-rank run still
// fits in 8 KiB.
std::string LogCursorToken(const v1::LogCursor& cursor);
// The cursor of a token; INVALID_ARGUMENT saying what is wrong with a token that is not one
// (another version, bytes cut short, positions out of order), and what ReadLogCursor refuses.
absl::StatusOr<v1::LogCursor> ReadLogCursorToken(std::string_view token);

// What a client received of one attempt, as a cursor.
class LogCursorKeeper {
 public:
  // Counts `line` as received. A line of another attempt than the first one seen starts the
  // cursor again at that attempt (a follow shows one attempt).
  void Received(const v1::LogLine& line);
  // Where the follow's streams start (LogLines.start): a stream with no line received yet goes
  // on from there, not from its first line.
  void Started(const v1::LogCursor& start);
  // Nothing received yet.
  bool empty() const { return !resumption_; }
  // The cursor to resume with; only when not empty.
  v1::LogCursor Cursor() const;

 private:
  std::optional<int32_t> resumption_;
  LogCursorPositions next_;
};

}  // namespace tessera
