#pragma once
// A TCP port on 127.0.0.1 that nothing listens on right now, for servers a test or benchmark
// starts on a port it must know beforehand. Without a test framework (benchmarks use it); tests
// call FreePort (free_port.h).
//
// The port is drawn below the kernel's ephemeral range (ip_local_port_range): a port from that
// range (what binding port 0 gives) may be taken, between this check and the server's bind, by
// any outgoing connection or any server on port 0 of a test running beside it; one below it is
// taken only by a server that asks for it by number.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "absl/status/statusor.h"

namespace tessera::testing {

// Whether nothing listens on (or holds) 127.0.0.1:`port` now; `port` 0 binds any and is read
// back into it.
inline bool LoopbackPortFree(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (ok) port = ntohs(addr.sin_port);
  return ok;
}

inline absl::StatusOr<int> LoopbackPort() {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  constexpr int kLowest = 10000;
  if (ephemeral_low > kLowest + 1000) {
    std::mt19937 draw{std::random_device{}()};
    std::uniform_int_distribution<int> below(kLowest, ephemeral_low - 1);
    for (int i = 0; i < 100; ++i) {
      int port = below(draw);
      if (LoopbackPortFree(port)) return port;
    }
  }
  int any = 0;  // no room below the range, or it is full: any free port
  if (LoopbackPortFree(any)) return any;
  return absl::InternalError("no free port on 127.0.0.1");
}

}  // namespace tessera::testing
