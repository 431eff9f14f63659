// Retry delays: one rule for the worker's reconnects, the log shipper's and the webhooks'.
#include "base/backoff.h"

#include <catch2/catch.hpp>
#include <memory>

namespace tessera {
namespace backoff_test {

// Draws the Uniform01() it is set to (0 and 1 - 2^-53 are exact; 0.5 too).
class SetRandom final : public Random {
 public:
  uint64_t Next() override { return bits; }
  void Draw(double u) { bits = static_cast<uint64_t>(u * 0x1.0p53) << 11; }
  uint64_t bits = 0;
};

TEST_CASE("backoff doubles up to its bound, draws within [d/2, d], and resets") {
  auto draw = std::make_shared<SetRandom>();
  Backoff b({.first = absl::Milliseconds(100), .max = absl::Seconds(1)}, draw);
  CHECK(b.Next() == absl::Milliseconds(50));
  CHECK(b.Next() == absl::Milliseconds(100));
  CHECK(b.Next() == absl::Milliseconds(200));
  CHECK(b.Next() == absl::Milliseconds(400));
  CHECK(b.Next() == absl::Milliseconds(500));  // 1 s bound, lowest draw
  draw->bits = ~uint64_t{0};
  CHECK(b.Next() > absl::Milliseconds(999));
  CHECK(b.Next() <= absl::Seconds(1));
  b.Reset();
  draw->Draw(0.5);
  CHECK(b.Next() == absl::Milliseconds(75));
}

TEST_CASE("backoff delays by retry number: the jitter's range, and no overflow far out") {
  SetRandom draw;
  const BackoffPolicy webhooks{
      .first = absl::Seconds(1), .max = absl::Minutes(5), .low = 0.8, .high = 1.2};
  CHECK(BackoffDelay(webhooks, 1, draw) == absl::Milliseconds(800));
  CHECK(BackoffDelay(webhooks, 0, draw) == absl::Milliseconds(800));  // counts as the first
  draw.Draw(0.5);
  CHECK(BackoffDelay(webhooks, 3, draw) == absl::Seconds(4));
  CHECK(BackoffDelay(webhooks, 1000000, draw) == absl::Minutes(5));
  draw.bits = ~uint64_t{0};
  const absl::Duration highest = BackoffDelay(webhooks, 9, draw);
  CHECK(highest > absl::Seconds(306));
  CHECK(highest < absl::Seconds(360));
}

}  // namespace backoff_test
}  // namespace tessera
