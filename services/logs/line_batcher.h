#pragma once
// Gathers a read's lines into LogLines messages for StreamLogs: a message per line costs the
// service a write (a system call and gRPC's framing) each, which bounded a follower of ranks
// printing fast; a message per page costs one.

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "proto/policy/packed_log_lines.h"
#include "tessera/v1/logs.pb.h"

namespace tessera::logs {

// Well under gRPC's default 4 MiB limit on what a client receives, whatever the lines.
inline constexpr size_t kMaxBatchBytes = 1 << 20;
inline constexpr int kMaxBatchLines = 2000;
// Packed lines cost the service a copy of their bytes each, not a message: more to a message.
inline constexpr int kMaxPackedBatchLines = 16384;

// A follow's start (LogLines.start), in a message of its own.
template <typename Writer>
bool WriteStart(Writer& writer, const v1::LogCursor& start) {
  v1::LogLines message;
  *message.mutable_start() = start;
  return writer.Write(message);
}

// `Writer` has bool Write(const v1::LogLines&) (grpc::ServerWriter, or a test's).
template <typename Writer>
class LineBatcher {
 public:
  explicit LineBatcher(Writer* writer) : writer_(writer) {}

  // Adds a copy of the line; writes the batch once it is full. False when the reader went away.
  bool Add(const v1::LogLine& line) {
    const size_t size = EncodedSizeBound(line);
    if (batch_.lines_size() > 0 && bytes_ + size > kMaxBatchBytes && !Flush()) return false;
    *batch_.add_lines() = line;
    bytes_ += size;
    return batch_.lines_size() < kMaxBatchLines || Flush();
  }

  // Writes what was gathered, then a message of `start` alone. False when the reader went away.
  bool Start(const v1::LogCursor& start) { return Flush() && WriteStart(*writer_, start); }

  // Writes what was gathered (nothing when empty). False when the reader went away.
  bool Flush() {
    if (batch_.lines_size() == 0) return true;
    const bool ok = writer_->Write(std::move(batch_));  // a writer may keep it
    batch_.Clear();
    bytes_ = 0;
    return ok;
  }

  // At least the line's size in the batch: its strings, and at most 11 bytes for each of its
  // other fields (a tag and a varint) and the field that holds it. Cheaper than ByteSizeLong,
  // which the write computes again anyway.
  static size_t EncodedSizeBound(const v1::LogLine& line) {
    return line.run_id().size() + line.text().size() + line.node_name().size() + 16 * 11;
  }

 private:
  Writer* writer_;
  v1::LogLines batch_;
  size_t bytes_ = 0;
};

// The same for a follower that asked for packed lines (GetLogsRequest.packed): a message holds
// a PackedLogLines per stream, each with the stream's lines in the order they were added.
template <typename Writer>
class PackedLineBatcher {
 public:
  explicit PackedLineBatcher(Writer* writer) : writer_(writer) {}

  // Adds a copy of the line's bytes (the line itself is left alone); writes the batch once it is
  // full. False when the reader went away.
  bool Add(const v1::LogLine& line) {
    const size_t size = kChunkLineHeaderBytes + line.text().size();
    if (lines_ > 0 && bytes_ + size > kMaxBatchBytes && !Flush()) return false;
    PackLine(line, GroupFor(line));
    bytes_ += size;
    ++lines_;
    return lines_ < kMaxPackedBatchLines || Flush();
  }

  // Adds lines already packed: `lines` (`count` of them) of `group`'s stream. A slice larger
  // than the bound goes in a message of its own (a pushed group holds at most the worker's batch,
  // 1 MiB of text and 4,096 lines, well under what a client receives).
  bool AddPacked(const v1::PackedLogLines& group, absl::string_view lines, int64_t count) {
    if (lines_ > 0 && bytes_ + lines.size() > kMaxBatchBytes && !Flush()) return false;
    if (last_ < 0 || !InPackedGroup(group, batch_.packed(last_))) last_ = FindOrAddGroup(group);
    batch_.mutable_packed(last_)->mutable_lines()->append(lines.data(), lines.size());
    bytes_ += lines.size();
    lines_ += static_cast<int>(count);
    return (lines_ < kMaxPackedBatchLines && bytes_ < kMaxBatchBytes) || Flush();
  }

  // Writes what was gathered, then a message of `start` alone. False when the reader went away.
  bool Start(const v1::LogCursor& start) { return Flush() && WriteStart(*writer_, start); }

  bool Flush() {
    if (lines_ == 0) return true;
    const bool ok = writer_->Write(std::move(batch_));  // a writer may keep it
    batch_.Clear();
    groups_.clear();
    last_ = -1;
    bytes_ = 0;
    lines_ = 0;
    return ok;
  }

 private:
  // The line's group in this message; a stream's lines that come with other fields (another
  // node after a move) start a group of their own.
  v1::PackedLogLines& GroupFor(const v1::LogLine& line) {
    // A page's lines come in runs of one stream: the last group is tried first.
    if (last_ < 0 || !InPackedGroup(line, batch_.packed(last_))) last_ = FindOrAddGroup(line);
    return *batch_.mutable_packed(last_);
  }
  // `of`: a line, or a group, of the stream.
  template <typename Of>
  int FindOrAddGroup(const Of& of) {
    auto [it, fresh] = groups_.try_emplace({of.rank(), of.stream()}, batch_.packed_size());
    if (!fresh && InPackedGroup(of, batch_.packed(it->second))) return it->second;
    it->second = batch_.packed_size();
    CopyStreamFields(of, *batch_.add_packed());
    bytes_ += of.run_id().size() + of.node_name().size() + 8 * 11;
    return it->second;
  }

  Writer* writer_;
  v1::LogLines batch_;
  // (rank, stream) to its group in batch_.
  absl::flat_hash_map<std::pair<int32_t, int32_t>, int> groups_;
  int last_ = -1;  // the group the last line went to
  size_t bytes_ = 0;
  int lines_ = 0;
};

}  // namespace tessera::logs
