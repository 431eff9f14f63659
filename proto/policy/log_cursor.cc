#include "proto/policy/log_cursor.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

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

namespace {

constexpr char kTokenPrefix[] = "c1.";

// A position's place in the token's order: rank, then stdout before stderr.
uint64_t PositionKey(const v1::LogCursor::Position& p) {
  return static_cast<uint64_t>(p.rank()) * 2 + (p.stream() == v1::LOG_STREAM_STDERR ? 1 : 0);
}

}  // namespace

std::string LogCursorToken(const v1::LogCursor& cursor) {
  std::vector<const v1::LogCursor::Position*> order;
  order.reserve(cursor.positions_size());
  for (const auto& p : cursor.positions()) order.push_back(&p);
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return PositionKey(*a) < PositionKey(*b); });
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream sink(&bytes);
    google::protobuf::io::CodedOutputStream out(&sink);
    out.WriteVarint32(static_cast<uint32_t>(cursor.resumption_index()));
    uint64_t previous = 0;
    for (const auto* p : order) {
      const uint64_t key = PositionKey(*p);
      out.WriteVarint64(key - previous);
      out.WriteVarint64(static_cast<uint64_t>(p->next_sequence()));
      previous = key;
    }
  }
  return absl::StrCat(kTokenPrefix, absl::WebSafeBase64Escape(bytes));
}

absl::StatusOr<v1::LogCursor> ReadLogCursorToken(std::string_view token) {
  auto refuse = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("not a log cursor: ", why));
  };
  absl::string_view rest(token.data(), token.size());
  if (!absl::ConsumePrefix(&rest, kTokenPrefix)) {
    return refuse("it does not start with \"c1.\" (a cursor of this version)");
  }
  std::string bytes;
  if (!absl::WebSafeBase64Unescape(rest, &bytes)) {
    return refuse("what follows \"c1.\" is not base64url");
  }
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  v1::LogCursor cursor;
  uint32_t resumption = 0;
  if (!in.ReadVarint32(&resumption) || resumption > INT32_MAX) {
    return refuse("its attempt is missing or out of range");
  }
  cursor.set_resumption_index(static_cast<int32_t>(resumption));
  uint64_t key = 0;
  while (in.CurrentPosition() < static_cast<int>(bytes.size())) {
    if (cursor.positions_size() >= kMaxLogCursorPositions) {
      return refuse(absl::StrCat("more than ", kMaxLogCursorPositions, " positions"));
    }
    uint64_t step = 0, next = 0;
    if (!in.ReadVarint64(&step) || !in.ReadVarint64(&next)) return refuse("it is cut short");
    if (step == 0 && cursor.positions_size() > 0) return refuse("a position is given twice");
    if (step > uint64_t{INT32_MAX} * 2 + 1 - key || next > uint64_t{INT64_MAX}) {
      return refuse("a rank or sequence is out of range");
    }
    key += step;
    v1::LogCursor::Position* p = cursor.add_positions();
    p->set_rank(static_cast<int32_t>(key / 2));
    p->set_stream(key % 2 ? v1::LOG_STREAM_STDERR : v1::LOG_STREAM_STDOUT);
    p->set_next_sequence(static_cast<int64_t>(next));
  }
  return cursor;
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
