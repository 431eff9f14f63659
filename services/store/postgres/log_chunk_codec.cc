#include "services/store/postgres/log_chunk_codec.h"

#include "absl/strings/str_cat.h"

namespace tessera::store {
namespace {

void PutBigEndian(uint64_t value, int bytes, std::string& out) {
  for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

uint64_t GetBigEndian(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

}  // namespace

void AppendChunkLine(const ChunkLine& line, std::string& chunk) {
  PutBigEndian(static_cast<uint64_t>(line.sequence), 8, chunk);
  PutBigEndian(static_cast<uint64_t>(line.micros), 8, chunk);
  PutBigEndian(static_cast<uint64_t>(line.dropped), 8, chunk);
  PutBigEndian(static_cast<uint32_t>(line.text.size()), 4, chunk);
  chunk.append(line.text.data(), line.text.size());
}

absl::Status ForEachChunkLine(absl::string_view chunk,
                              const std::function<void(const ChunkLine&)>& fn) {
  size_t at = 0;
  while (at < chunk.size()) {
    if (chunk.size() - at < kChunkLineHeaderBytes) {
      return absl::DataLossError(absl::StrCat("a stored log chunk ends inside a line header (",
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
      return absl::DataLossError(absl::StrCat("a stored log chunk's line of ", length,
                                              " bytes runs past its end (", chunk.size() - at,
                                              " bytes left)"));
    }
    line.text = chunk.substr(at, length);
    at += length;
    fn(line);
  }
  return absl::OkStatus();
}

}  // namespace tessera::store
