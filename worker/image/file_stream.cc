#include "worker/image/file_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera::worker::image {

absl::Status WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("cannot spool a layer: ", strerror(errno)));
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status StreamFile(const std::string& path, const ByteSink& sink) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::string buffer(1 << 20, '\0');
  absl::Status st;
  while (st.ok()) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) st = absl::InternalError(absl::StrCat("cannot read ", path, ": ", strerror(errno)));
    if (n <= 0) break;
    st = sink(buffer.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return st;
}

}  // namespace tessera::worker::image
