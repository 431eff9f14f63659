#pragma once
// Lines of one log stream as one run of bytes: how the log store keeps them (a row of
// log_chunks per chunk) and how they travel packed (v1::PackedLogLines, from the worker to the
// log service and from it to a follower), so that a line is encoded once on its way. Each line
// is a fixed 28-byte header, big-endian: sequence (8), time in microseconds since the epoch (8),
// the number of lines a marker stands for (8; 0 for a printed line), the text's length (4),
// then the text. Big-endian fixed widths so that SQL can write the same bytes with int8send and
// int4send (migration 0008 turns the rows of the old one-row-per-line table into chunks).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tessera {

struct ChunkLine {
  int64_t sequence = 0;
  int64_t micros = 0;
  int64_t dropped = 0;
  absl::string_view text;
};

inline constexpr size_t kChunkLineHeaderBytes = 28;

// Appends one line to `chunk`.
void AppendChunkLine(const ChunkLine& line, std::string& chunk);

// How many whole lines `chunk` holds (a line cut short is not counted).
size_t CountChunkLines(absl::string_view chunk);

// The error for bytes at `offset` of `chunk` that are not a whole line.
absl::Status MalformedChunkAt(absl::string_view chunk, size_t offset);

// Reads a line at `offset` of `chunk` into `line`, returning the offset after it; 0 when the
// bytes there are not a whole line (a line is never empty: its header alone is 28 bytes).
inline size_t ReadChunkLine(absl::string_view chunk, size_t offset, ChunkLine& line) {
  const auto get = [&](size_t at, int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) {
      value = (value << 8) | static_cast<unsigned char>(chunk[offset + at + i]);
    }
    return value;
  };
  if (chunk.size() - offset < kChunkLineHeaderBytes) return 0;
  const uint64_t length = get(24, 4);
  if (chunk.size() - offset - kChunkLineHeaderBytes < length) return 0;
  line.sequence = static_cast<int64_t>(get(0, 8));
  line.micros = static_cast<int64_t>(get(8, 8));
  line.dropped = static_cast<int64_t>(get(16, 8));
  line.text = chunk.substr(offset + kChunkLineHeaderBytes, length);
  return offset + kChunkLineHeaderBytes + length;
}

// Calls `fn` for every line of `chunk`, in stored order (inline: this is the log path's hot
// loop). A chunk cut short or with a length past its end is DataLoss naming the offset (nothing
// after the fault is reported).
template <typename Fn>
absl::Status ForEachChunkLine(absl::string_view chunk, Fn&& fn) {
  ChunkLine line;
  for (size_t at = 0; at < chunk.size();) {
    const size_t next = ReadChunkLine(chunk, at, line);
    if (next == 0) return MalformedChunkAt(chunk, at);
    fn(static_cast<const ChunkLine&>(line));
    at = next;
  }
  return absl::OkStatus();
}

}  // namespace tessera
