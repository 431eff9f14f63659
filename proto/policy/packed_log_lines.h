#pragma once
// Log lines packed per stream (v1::PackedLogLines): written by the worker and by the log
// service for followers that ask for them, read by the log service and by clients (mcli, the
// REST gateway, the benches). The lines' bytes are those of base/log_line_codec.h.

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/log_line_codec.h"
#include "tessera/v1/logs.pb.h"

namespace tessera {

// A line's time in microseconds since the epoch (the precision the log store keeps), and back.
int64_t LogTimeMicros(const google::protobuf::Timestamp& time);
google::protobuf::Timestamp LogTimeFromMicros(int64_t micros);

// Whether `stream` (a v1::LogLine, or another group) belongs to `group`'s stream: the fields a
// group holds once, which both messages name alike.
template <typename Stream>
bool InPackedGroup(const Stream& stream, const v1::PackedLogLines& group) {
  return stream.rank() == group.rank() && stream.stream() == group.stream() &&
         stream.resumption_index() == group.resumption_index() &&
         stream.node_rank() == group.node_rank() && stream.run_id() == group.run_id() &&
         stream.node_name() == group.node_name();
}
// Copies the stream fields a line and a group share (run, attempt, ranks, stream, node) from
// `from` to `to`, either a v1::LogLine or a v1::PackedLogLines (a group's lines are left alone).
template <typename From, typename To>
void CopyStreamFields(const From& from, To& to) {
  to.set_run_id(from.run_id());
  to.set_resumption_index(from.resumption_index());
  to.set_node_rank(from.node_rank());
  to.set_rank(from.rank());
  to.set_stream(from.stream());
  to.set_node_name(from.node_name());
}
// Appends `line` (of `group`'s stream) to `group`.
void PackLine(const v1::LogLine& line, v1::PackedLogLines& group);

// Calls `fn` for each of `group`'s lines in order; DataLoss (naming the offset) for bytes that
// are not whole lines.
template <typename Fn>
absl::Status ForEachPackedLine(const v1::PackedLogLines& group, Fn&& fn) {
  return ForEachChunkLine(group.lines(), std::forward<Fn>(fn));
}
// `group`'s lines as messages, appended to `out`.
absl::Status UnpackLines(const v1::PackedLogLines& group, std::vector<v1::LogLine>& out);

// A StreamLogs message's lines in display order: `lines`, then `packed` merged by time (each
// group's lines in their order; a line sorts at the latest time of its group so far, ties by
// rank then stream), as logs.proto says.
absl::StatusOr<std::vector<v1::LogLine>> LinesInDisplayOrder(const v1::LogLines& batch);

}  // namespace tessera
