#include "proto/policy/log_cursor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera {

absl::StatusOr<LogCursorPositions> ReadLogCursor(const v1::LogCursor& cursor) {
  if (cursor.resumption_index() < 0) {
    return absl::InvalidArgumentError("resume.resumption_index: must not be negative");
  }
  if (cursor.positions_size() > kMaxLogCursorPositions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resume.positions: at most ", kMaxLogCursorPositions, ", not ", cursor.positions_size()));
  }
  LogCursorPositions positions;
  for (int i = 0; i < cursor.positions_size(); ++i) {
    const v1::LogCursor::Position& p = cursor.positions(i);
    const std::string field = absl::StrCat("resume.positions[", i, "]");
    if (p.rank() < 0) return absl::InvalidArgumentError(field + ".rank: must not be negative");
    if (p.stream() != v1::LOG_STREAM_STDOUT && p.stream() != v1::LOG_STREAM_STDERR) {
      return absl::InvalidArgumentError(field + ".stream: must be stdout or stderr");
    }
    if (p.next_sequence() < 0) {
      return absl::InvalidArgumentError(field + ".next_sequence: must not be negative");
    }
    if (!positions.emplace(std::pair{p.rank(), static_cast<int32_t>(p.stream())}, p.next_sequence())
             .second) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": rank ", p.rank(), "'s ",
          p.stream() == v1::LOG_STREAM_STDOUT ? "stdout" : "stderr", " is given twice"));
    }
  }
  return positions;
}

absl::StatusOr<std::optional<LogCursorPositions>> ReadResume(const v1::GetLogsRequest& req) {
  if (!req.has_resume()) return std::nullopt;
  if (req.previous() ||
      (req.has_resumption_index() && req.resumption_index() != req.resume().resumption_index())) {
    return absl::InvalidArgumentError(
        "resume: the cursor names the attempt; give no previous, and no other resumption_index");
  }
  if (req.tail() > 0 || req.first_exception()) {
    return absl::InvalidArgumentError(
        "resume: cannot be combined with tail or first_exception (a resumed follow goes on after "
        "the cursor)");
  }
  return ReadLogCursor(req.resume());
}

v1::LogCursor MakeLogCursor(int32_t resumption, const LogCursorPositions& positions) {
  v1::LogCursor cursor;
  cursor.set_resumption_index(resumption);
  for (const auto& [key, next] : positions) {
    v1::LogCursor::Position* p = cursor.add_positions();
    p->set_rank(key.first);
    p->set_stream(static_cast<v1::LogStream>(key.second));
    p->set_next_sequence(next);
  }
  return cursor;
}

void LogCursorKeeper::Received(const v1::LogLine& line) {
  if (resumption_ != line.resumption_index()) {
    resumption_ = line.resumption_index();
    next_.clear();
  }
  int64_t& next = next_[{line.rank(), static_cast<int32_t>(line.stream())}];
  next = std::max(next, line.sequence() + 1);
}

void LogCursorKeeper::Started(const v1::LogCursor& start) {
  if (resumption_ != start.resumption_index()) {
    resumption_ = start.resumption_index();
    next_.clear();
  }
  for (const v1::LogCursor::Position& p : start.positions()) {
    int64_t& next = next_[{p.rank(), static_cast<int32_t>(p.stream())}];
    next = std::max(next, p.next_sequence());
  }
}

v1::LogCursor LogCursorKeeper::Cursor() const {
  return MakeLogCursor(resumption_.value_or(0), next_);
}

}  // namespace tessera
