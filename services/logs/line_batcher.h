#pragma once
// Gathers a read's lines into LogLines messages for StreamLogs: a message per line costs the
// service a write (a system call and gRPC's framing) each, which bounded a follower of ranks
// printing fast; a message per page costs one.

#include <cstddef>
#include <utility>

#include "tessera/v1/logs.pb.h"

namespace tessera::logs {

// Well under gRPC's default 4 MiB limit on what a client receives, whatever the lines.
inline constexpr size_t kMaxBatchBytes = 1 << 20;
inline constexpr int kMaxBatchLines = 2000;

// `Writer` has bool Write(const v1::LogLines&) (grpc::ServerWriter, or a test's).
template <typename Writer>
class LineBatcher {
 public:
  explicit LineBatcher(Writer* writer) : writer_(writer) {}

  // Adds the line (taken over: a follower's lines are moved, not copied); writes the batch once
  // it is full. False when the reader went away.
  bool Add(v1::LogLine line) {
    const size_t size = EncodedSizeBound(line);
    if (batch_.lines_size() > 0 && bytes_ + size > kMaxBatchBytes && !Flush()) return false;
    *batch_.add_lines() = std::move(line);
    bytes_ += size;
    return batch_.lines_size() < kMaxBatchLines || Flush();
  }

  // Writes what was gathered (nothing when empty). False when the reader went away.
  bool Flush() {
    if (batch_.lines_size() == 0) return true;
    const bool ok = writer_->Write(batch_);
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

}  // namespace tessera::logs
