#include "worker/engine/checkpoint/shard_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "worker/engine/common/content_hash.h"

namespace tessera::engine {
namespace {

constexpr char kMagic[8] = {'T', 'S', 'S', 'H', 'A', 'R', 'D', '1'};
constexpr size_t kWriteChunk = 8 << 20;

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min(n, kWriteChunk));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Errno("write", path);
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShardFileName(int index, int shard_count) {
  return absl::StrFormat("shard-%05d-of-%05d.bin", index, shard_count);
}

absl::StatusOr<ShardRecord> WriteShardFile(const std::string& folder, int index, int shard_count,
                                           int64_t step, int64_t numel,
                                           const ShardPayload& payload) {
  ShardRecord record;
  record.index = index;
  record.file = ShardFileName(index, shard_count);
  record.offset = payload.offset;
  record.count = payload.count;
  const std::string path = folder + "/" + record.file;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open", tmp);
  char header[kShardHeaderBytes] = {};
  std::memcpy(header, kMagic, sizeof kMagic);
  const uint32_t version = 1, arrays = static_cast<uint32_t>(payload.arrays.size());
  const int64_t fields[4] = {payload.offset, payload.count, numel, step};
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &arrays, 4);
  std::memcpy(header + 16, fields, sizeof fields);
  // The hash is computed on another thread while this one writes: the same bytes, read twice
  // from memory, so hashing costs the save next to nothing.
  const size_t array_bytes = static_cast<size_t>(payload.count) * sizeof(float);
  std::string digest;
  std::thread hashing([&] {
    ContentHasher hasher;
    hasher.Update(header, sizeof header);
    for (const float* a : payload.arrays) hasher.Update(a, array_bytes);
    digest = hasher.HexDigest();
  });
  absl::Status st = WriteAll(fd, header, sizeof header, tmp);
  for (const float* a : payload.arrays) {
    if (!st.ok()) break;
    st = WriteAll(fd, reinterpret_cast<const char*>(a), array_bytes, tmp);
  }
  hashing.join();
  record.hash = std::move(digest);
  if (st.ok() && ::fsync(fd) != 0) st = Errno("fsync", tmp);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = Errno("rename", tmp);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  record.bytes = kShardHeaderBytes + static_cast<int64_t>(payload.arrays.size()) * payload.count *
                                         static_cast<int64_t>(sizeof(float));
  return record;
}

absl::Status ReadFlatRange(const std::string& folder, const CheckpointManifest& manifest, int array,
                           int64_t begin, int64_t end, float* out) {
  const int arrays = static_cast<int>(manifest.arrays.size());
  if (array < 0 || array >= arrays || begin < 0 || end > manifest.numel || begin > end) {
    return absl::OutOfRangeError(absl::StrCat("elements [", begin, ", ", end, ") of array ", array,
                                              " are outside the checkpoint"));
  }
  for (const auto& shard : manifest.shards) {
    const int64_t lo = std::max(begin, shard.offset);
    const int64_t hi = std::min(end, shard.offset + shard.count);
    if (lo >= hi) continue;
    const std::string path = folder + "/" + shard.file;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::DataLossError(absl::StrCat(path, ": ", std::strerror(errno)));
    const off_t at =
        kShardHeaderBytes + (static_cast<int64_t>(array) * shard.count + (lo - shard.offset)) * 4;
    char* dst = reinterpret_cast<char*>(out + (lo - begin));
    size_t want = static_cast<size_t>(hi - lo) * 4, done = 0;
    while (done < want) {
      const ssize_t n = ::pread(fd, dst + done, want - done, at + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        return absl::DataLossError(absl::StrCat(path, ": ended after ", at + done, " bytes"));
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  return absl::OkStatus();
}

absl::Status ValidateShards(const std::string& folder, const CheckpointManifest& manifest,
                            bool hashes) {
  for (const auto& shard : manifest.shards) {
    const std::string path = folder + "/" + shard.file;
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return absl::DataLossError(absl::StrCat(path, ": missing (", ec.message(), ")"));
    if (static_cast<int64_t>(size) != shard.bytes) {
      return absl::DataLossError(absl::StrCat(path, ": ", size, " bytes, the manifest says ",
                                              shard.bytes, " (truncated)"));
    }
    if (hashes) {
      TESSERA_ASSIGN_OR_RETURN(const std::string hash, HashFile(path));
      if (hash != shard.hash) {
        return absl::DataLossError(absl::StrCat(path, ": content hash ", hash,
                                                " does not match the manifest's ", shard.hash));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::engine
