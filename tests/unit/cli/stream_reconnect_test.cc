// When mcli opens a follow or watch again: after UNAVAILABLE only, at once the first time, then
// after pauses that double while nothing arrives, until it gives up; on the fake clock.

#include "cli/stream_reconnect.h"

#include <catch2/catch.hpp>
#include <sstream>

namespace stream_reconnect_test {

using tessera::FakeClock;
using tessera::cli::StreamReconnects;

const grpc::Status kLifetime(grpc::StatusCode::UNAVAILABLE,
                             "this stream reached its maximum lifetime (30m)");
const grpc::Status kDown(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses");

TEST_CASE("a stream ended with UNAVAILABLE is opened again, any other end stands") {
  auto clock = std::make_shared<FakeClock>();
  std::ostringstream err;
  StreamReconnects reconnects(err, "the logs of run r", clock, absl::Minutes(2));
  CHECK_FALSE(reconnects.Again(grpc::Status::OK));
  CHECK_FALSE(reconnects.Again(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "revoked")));
  CHECK_FALSE(reconnects.Again(grpc::Status(grpc::StatusCode::NOT_FOUND, "no run")));
  CHECK(err.str().empty());
}

TEST_CASE("the first end is opened again at once and silently, later ones after doubling pauses") {
  auto clock = std::make_shared<FakeClock>();
  const absl::Time t0 = clock->Now();
  std::ostringstream err;
  StreamReconnects reconnects(err, "the logs of run r", clock, absl::Minutes(2));
  CHECK(reconnects.Again(kLifetime));
  CHECK(clock->Now() == t0);
  CHECK(err.str().empty());
  CHECK(reconnects.Again(kDown));
  CHECK(clock->Now() == t0 + absl::Milliseconds(250));
  CHECK(err.str() ==
        "Reconnecting to the logs of run r in 250ms: failed to connect to all "
        "addresses\n");
  CHECK(reconnects.Again(kDown));
  CHECK(clock->Now() == t0 + absl::Milliseconds(750));
  for (int i = 0; i < 6; ++i) CHECK(reconnects.Again(kDown));
  // 250 ms doubling up to 5 s: 0.25 + 0.5 + 1 + 2 + 4 + 5 + 5 + 5.
  CHECK(clock->Now() == t0 + absl::Milliseconds(22750));
  SECTION("a message arriving makes the next end routine again") {
    reconnects.Received();
    const absl::Time before = clock->Now();
    CHECK(reconnects.Again(kLifetime));
    CHECK(clock->Now() == before);
  }
  SECTION("nothing for the whole budget: the error stands") {
    while (clock->Now() - t0 < absl::Minutes(2)) REQUIRE(reconnects.Again(kDown));
    CHECK_FALSE(reconnects.Again(kDown));
  }
}

TEST_CASE("a quiet stream that stayed open ends at its lifetime for ever, never given up") {
  auto clock = std::make_shared<FakeClock>();
  std::ostringstream err;
  StreamReconnects reconnects(err, "the watch of run r", clock, absl::Minutes(2));
  for (int i = 0; i < 10; ++i) {
    clock->Advance(absl::Minutes(30));  // open for its lifetime, nothing arrived
    const absl::Time ended = clock->Now();
    REQUIRE(reconnects.Again(kLifetime));
    CHECK(clock->Now() == ended);
  }
  CHECK(err.str().empty());
}

}  // namespace stream_reconnect_test
