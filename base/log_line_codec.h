#pragma once
// Lines of one log stream as one run of bytes: how the log store keeps them (a row of
// log_chunks per chunk) and how they travel packed (v1::PackedLogLines, from the worker to the
// log service and from it to a follower), so that a line is encoded once on its way. Each line
// is a fixed 28-byte header, big-endian: sequence (8), time in microseconds since the epoch (8),
// the number of lines a marker stands for (8; 0 for a printed line), the text's length (4),
// then the text. Big-endian fixed widths so that SQL can write the same bytes with int8send and
// int4send (migration 0008 turns the rows of the old one-row-per-line table into chunks).

#include <endian.h>

#include <cstdint>
#include <cstring>
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
// Big-endian fixed widths, read and written with one load or store each.
inline uint64_t LoadBigEndian64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return be64toh(v);
}
inline uint32_t LoadBigEndian32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return be32toh(v);
}
inline void StoreBigEndian64(char* p, uint64_t v) {
  v = htobe64(v);
  std::memcpy(p, &v, sizeof v);
}
inline void StoreBigEndian32(char* p, uint32_t v) {
  v = htobe32(v);
  std::memcpy(p, &v, sizeof v);
}

inline size_t ReadChunkLine(absl::string_view chunk, size_t offset, ChunkLine& line) {
  if (chunk.size() - offset < kChunkLineHeaderBytes) return 0;
  const char* header = chunk.data() + offset;
  const uint64_t length = LoadBigEndian32(header + 24);
  if (chunk.size() - offset - kChunkLineHeaderBytes < length) return 0;
  line.sequence = static_cast<int64_t>(LoadBigEndian64(header));
  line.micros = static_cast<int64_t>(LoadBigEndian64(header + 8));
  line.dropped = static_cast<int64_t>(LoadBigEndian64(header + 16));
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
