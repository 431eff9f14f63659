#include "worker/engine/common/content_hash.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::engine {

ContentHasher::ContentHasher() : state_(XXH3_createState()) { XXH3_128bits_reset(state_); }

ContentHasher::~ContentHasher() { XXH3_freeState(state_); }

void ContentHasher::Update(const void* data, size_t size) {
  XXH3_128bits_update(state_, data, size);
}

std::string ContentHasher::HexDigest() const {
  const XXH128_hash_t h = XXH3_128bits_digest(state_);
  return absl::StrFormat("%016x%016x", h.high64, h.low64);
}

std::string HashBytes(std::string_view bytes) {
  ContentHasher hasher;
  hasher.Update(bytes.data(), bytes.size());
  return hasher.HexDigest();
}

absl::StatusOr<std::string> HashFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  ContentHasher hasher;
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::DataLossError(absl::StrCat(path, ": read: ", std::strerror(err)));
    }
    if (n == 0) break;
    hasher.Update(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return hasher.HexDigest();
}

}  // namespace tessera::engine
