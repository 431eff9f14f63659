#pragma once
// A TCP port on 127.0.0.1 that nothing listens on right now: bound to port 0, read, and closed
// again. Without a test framework (benchmarks use it); tests call FreePort (free_port.h).

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/status/statusor.h"

namespace tessera::testing {

inline absl::StatusOr<int> LoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) return absl::InternalError("no free port on 127.0.0.1");
  return ntohs(addr.sin_port);
}

}  // namespace tessera::testing
