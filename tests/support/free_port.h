#pragma once
// A TCP port on 127.0.0.1 that nothing listens on right now: bound to port 0, read, and closed
// again. For servers a test starts on a port it must know beforehand, and for "nothing answers
// there" cases.

#include <catch2/catch.hpp>

#include "tests/support/loopback_port.h"

namespace tessera::testing {

inline int FreePort() {
  auto port = LoopbackPort();
  REQUIRE(port.ok());
  return *port;
}

}  // namespace tessera::testing
