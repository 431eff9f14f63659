#include "base/log_line_codec.h"

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

// Writes `value`'s low `bytes` bytes, most significant first.
char* PutBigEndian(uint64_t value, int bytes, char* out) {
  for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) {
    *out++ = static_cast<char>((value >> shift) & 0xff);
  }
  return out;
}

}  // namespace

void AppendChunkLine(const ChunkLine& line, std::string& chunk) {
  // The header is put together first and appended once: a line is encoded on every hop of its
  // way, so this is on the log path's hot loop.
  char header[kChunkLineHeaderBytes];
  char* p = PutBigEndian(static_cast<uint64_t>(line.sequence), 8, header);
  p = PutBigEndian(static_cast<uint64_t>(line.micros), 8, p);
  p = PutBigEndian(static_cast<uint64_t>(line.dropped), 8, p);
  PutBigEndian(static_cast<uint32_t>(line.text.size()), 4, p);
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
  uint64_t length = 0;
  for (int i = 0; i < 4; ++i) {
    length = (length << 8) | static_cast<unsigned char>(chunk[offset + 24 + i]);
  }
  return absl::DataLossError(absl::StrCat("an encoded log line of ", length, " bytes at offset ",
                                          offset, " runs past the end (",
                                          left - kChunkLineHeaderBytes, " bytes left)"));
}

}  // namespace tessera
