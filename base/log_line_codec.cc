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

uint64_t GetBigEndian(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
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
  for (size_t at = 0; chunk.size() - at >= kChunkLineHeaderBytes; ++lines) {
    const uint64_t length = GetBigEndian(chunk.data() + at + 24, 4);
    if (chunk.size() - at - kChunkLineHeaderBytes < length) break;
    at += kChunkLineHeaderBytes + length;
  }
  return lines;
}

absl::Status ForEachChunkLine(absl::string_view chunk,
                              const std::function<void(const ChunkLine&)>& fn) {
  size_t at = 0;
  while (at < chunk.size()) {
    if (chunk.size() - at < kChunkLineHeaderBytes) {
      return absl::DataLossError(absl::StrCat("encoded log lines end inside a line header (",
                                              chunk.size() - at, " bytes left at offset ", at,
                                              ")"));
    }
    const char* p = chunk.data() + at;
    ChunkLine line;
    line.sequence = static_cast<int64_t>(GetBigEndian(p, 8));
    line.micros = static_cast<int64_t>(GetBigEndian(p + 8, 8));
    line.dropped = static_cast<int64_t>(GetBigEndian(p + 16, 8));
    const uint64_t length = GetBigEndian(p + 24, 4);
    at += kChunkLineHeaderBytes;
    if (chunk.size() - at < length) {
      return absl::DataLossError(absl::StrCat(
          "an encoded log line of ", length, " bytes at offset ", at - kChunkLineHeaderBytes,
          " runs past the end (", chunk.size() - at, " bytes left)"));
    }
    line.text = chunk.substr(at, length);
    at += length;
    fn(line);
  }
  return absl::OkStatus();
}

}  // namespace tessera
