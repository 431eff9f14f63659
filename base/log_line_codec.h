#pragma once
// Lines of one log stream as one run of bytes: how the log store keeps them (a row of
// log_chunks per chunk) and how they travel packed (v1::PackedLogLines, from the worker to the
// log service and from it to a follower), so that a line is encoded once on its way. Each line
// is a fixed 28-byte header, big-endian: sequence (8), time in microseconds since the epoch (8),
// the number of lines a marker stands for (8; 0 for a printed line), the text's length (4),
// then the text. Big-endian fixed widths so that SQL can write the same bytes with int8send and
// int4send (migration 0008 turns the rows of the old one-row-per-line table into chunks).

#include <cstdint>
#include <functional>
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

// Calls `fn` for every line of `chunk`, in stored order. A chunk cut short or with a length past
// its end is DataLoss naming the offset (nothing after the fault is reported).
absl::Status ForEachChunkLine(absl::string_view chunk,
                              const std::function<void(const ChunkLine&)>& fn);

}  // namespace tessera
