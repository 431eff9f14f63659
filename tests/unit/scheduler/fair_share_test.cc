// Fair share: decayed usage and the order of owners.

#include "scheduler/placement/fair_share.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace tessera::scheduler {
namespace fair_share_test {

constexpr int64_t kHour = int64_t{3600} * 1000000;
constexpr double kHalfLife = 24 * 3600.0;  // a day

TEST_CASE("Fair share: usage decays by half every half-life", "[fair_share]") {
  const int64_t now = 100 * 24 * kHour;
  // One GPU for one hour, just ended: about 3600 GPU-seconds (slightly less, decayed).
  const double fresh = DecayedGpuSeconds(1, now - kHour, now, now, kHalfLife);
  CHECK(
      fresh ==
      Approx(3600 * (kHalfLife / 3600 / std::log(2.0)) * (1 - std::exp2(-1.0 / 24))).epsilon(1e-9));
  CHECK(fresh < 3600);
  CHECK(fresh > 3500);
  // The same hour a day earlier counts half; eight GPUs count eight times.
  const double day_old = DecayedGpuSeconds(1, now - 25 * kHour, now - 24 * kHour, now, kHalfLife);
  CHECK(day_old == Approx(fresh / 2).epsilon(1e-9));
  CHECK(DecayedGpuSeconds(8, now - kHour, now, now, kHalfLife) == Approx(8 * fresh));
  // A running attempt counts up to now; nothing before its start or after now.
  CHECK(DecayedGpuSeconds(1, now - kHour, now + 5 * kHour, now, kHalfLife) == Approx(fresh));
  CHECK(DecayedGpuSeconds(1, now, now + kHour, now, kHalfLife) == 0);
  CHECK(DecayedGpuSeconds(0, now - kHour, now, now, kHalfLife) == 0);
}

TEST_CASE("Fair share: the team that used less of its share goes first", "[fair_share]") {
  const int64_t now = 10 * 24 * kHour;
  FairShare share(kHalfLife);
  share.AddUsage("vision", "ann", 64, now - 24 * kHour, now, now);  // yesterday, all day
  share.AddUsage("speech", "bob", 8, now - 2 * kHour, now, now);
  CHECK(share.TeamFactor("idle") == 1.0);
  CHECK(share.TeamFactor("speech") > share.TeamFactor("vision"));
  const std::vector<std::pair<std::string, std::string>> owners = {
      {"vision", "ann"}, {"speech", "bob"}, {"idle", "cat"}, {"vision", "ann"}};
  const std::vector<uint32_t> ranks = share.Ranks(owners);
  CHECK(ranks == std::vector<uint32_t>{2, 1, 0, 2});
}

TEST_CASE("Fair share: a larger share excuses larger usage", "[fair_share]") {
  const int64_t now = 10 * 24 * kHour;
  FairShare share(kHalfLife);
  share.SetShare("big", 4);
  share.SetShare("small", 1);
  // big used three times as much as small, but its share is four times as large.
  share.AddUsage("big", "u1", 24, now - kHour, now, now);
  share.AddUsage("small", "u2", 8, now - kHour, now, now);
  CHECK(share.TeamFactor("big") > share.TeamFactor("small"));
  CHECK(share.Ranks({{"small", "u2"}, {"big", "u1"}}) == std::vector<uint32_t>{1, 0});
}

TEST_CASE("Fair share: within a team, the user who ran less goes first", "[fair_share]") {
  const int64_t now = 10 * 24 * kHour;
  FairShare share(kHalfLife);
  share.AddUsage("t", "heavy", 8, now - 10 * kHour, now, now);
  share.AddUsage("t", "light", 8, now - kHour, now, now);
  CHECK(share.Ranks({{"t", "heavy"}, {"t", "light"}, {"t", "new"}}) ==
        std::vector<uint32_t>{2, 1, 0});
  // Ties (nobody used anything) go by team, then user name.
  FairShare empty(kHalfLife);
  CHECK(empty.Ranks({{"b", "x"}, {"a", "z"}, {"a", "y"}}) == std::vector<uint32_t>{2, 1, 0});
}

TEST_CASE("Fair share: yesterday's heavy user yields to today's light one, and recovers",
          "[fair_share]") {
  const int64_t day = 24 * kHour;
  const int64_t now = 30 * day;
  FairShare today(kHalfLife);
  today.AddUsage("a", "u", 64, now - 2 * day, now - day, now);  // all of yesterday
  today.AddUsage("b", "v", 8, now - 2 * kHour, now, now);
  CHECK(today.Ranks({{"a", "u"}, {"b", "v"}}) == std::vector<uint32_t>{1, 0});
  // Ten half-lives later a's usage has decayed below b's recent use.
  FairShare later(kHalfLife);
  later.AddUsage("a", "u", 64, now - 12 * day, now - 11 * day, now);
  later.AddUsage("b", "v", 8, now - 2 * kHour, now, now);
  CHECK(later.Ranks({{"a", "u"}, {"b", "v"}}) == std::vector<uint32_t>{0, 1});
}

}  // namespace fair_share_test
}  // namespace tessera::scheduler
