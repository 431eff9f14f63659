#include "base/log_line_codec.h"

#include "absl/strings/str_cat.h"

namespace tessera {

void AppendChunkLine(const ChunkLine& line, std::string& chunk) {
  // The header is put together first and appended once: a line is encoded on every hop of its
  // way, so this is on the log path's hot loop.
  char header[kChunkLineHeaderBytes];
  StoreBigEndian64(header, static_cast<uint64_t>(line.sequence));
  StoreBigEndian64(header + 8, static_cast<uint64_t>(line.micros));
  StoreBigEndian64(header + 16, static_cast<uint64_t>(line.dropped));
  StoreBigEndian32(header + 24, static_cast<uint32_t>(line.text.size()));
  chunk.append(header, kChunkLineHeaderBytes);
  chunk.append(line.text.data(), line.text.size());
}

size_t CountChunkLines(absl::string_view chunk) {
  size_t lines = 0;
  ChunkLine line;
  for (size_t at = 0; at < chunk.size(); ++lines) {
    at = ReadChunkLine(chunk, at, line);
    if (at == 0) break;
  }
  return lines;
}

absl::Status MalformedChunkAt(absl::string_view chunk, size_t offset) {
  const size_t left = chunk.size() - offset;
  if (left < kChunkLineHeaderBytes) {
    return absl::DataLossError(absl::StrCat("encoded log lines end inside a line header (", left,
                                            " bytes left at offset ", offset, ")"));
  }
  const uint64_t length = LoadBigEndian32(chunk.data() + offset + 24);
  return absl::DataLossError(absl::StrCat("an encoded log line of ", length, " bytes at offset ",
                                          offset, " runs past the end (",
                                          left - kChunkLineHeaderBytes, " bytes left)"));
}

}  // namespace tessera
