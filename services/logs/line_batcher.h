#pragma once
// Gathers a read's lines into LogLines messages for StreamLogs: a message per line costs the
// service a write (a system call and gRPC's framing) each, which bounded a follower of ranks
// printing fast; a message per page costs one.

#include <cstddef>

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

  // Adds the line; writes the batch once it is full. False when the reader went away.
  bool Add(const v1::LogLine& line) {
    const size_t size = line.ByteSizeLong() + 8;  // and the field's tag and length
    if (batch_.lines_size() > 0 && bytes_ + size > kMaxBatchBytes && !Flush()) return false;
    *batch_.add_lines() = line;
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

 private:
  Writer* writer_;
  v1::LogLines batch_;
  size_t bytes_ = 0;
};

}  // namespace tessera::logs
