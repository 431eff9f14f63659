// StreamPump (stream_pump.h): a stream's next step runs when its topic moves, at its moment on the
// injected clock, or when woken; never before. The fake clock decides every moment.
#include "services/common/stream_pump.h"

#include <atomic>
#include <catch2/catch.hpp>

namespace tessera {
namespace stream_pump_test {

using store::ChangeTopic;

struct Pumped {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<store::ChangeFeed> feed = std::make_shared<store::ChangeFeed>();
  StreamPump pump{feed, ChangeTopic::kLogs, clock, 2};
  std::atomic<int> ran{0};

  std::function<void()> Count() {
    return [this] { ++ran; };
  }
  // Waits (real time) for `n` runs; a run that should not come is checked by waiting() instead.
  bool Ran(int n) {
    for (int i = 0; i < 10'000 && ran.load() < n; ++i) absl::SleepFor(absl::Milliseconds(1));
    return ran.load() == n;
  }
};

TEST_CASE("a waiting stream runs when its topic moves, and not for another topic") {
  Pumped p;
  const uint64_t seen = p.pump.Generation();
  p.pump.RunAfterChange(seen, p.clock->Now() + absl::Hours(1), p.Count());
  p.pump.RunAfterChange(seen, p.clock->Now() + absl::Hours(1), p.Count());
  CHECK(p.pump.waiting() == 2);
  p.feed->Bump(ChangeTopic::kRunEvents);
  CHECK(p.pump.waiting() == 2);
  CHECK(p.ran.load() == 0);
  p.feed->Bump(ChangeTopic::kLogs);
  CHECK(p.Ran(2));
  CHECK(p.pump.waiting() == 0);
  // A change missed by the feed's listener (BumpAll) moves every topic.
  p.pump.RunAfterChange(p.pump.Generation(), p.clock->Now() + absl::Hours(1), p.Count());
  p.feed->BumpAll();
  CHECK(p.Ran(3));
}

TEST_CASE("with a tick, waits end together at its next multiple, never before their moments") {
  auto clock = std::make_shared<FakeClock>();
  clock->Set(absl::FromUnixSeconds(1'000'000));  // on the tick's grid
  auto feed = std::make_shared<store::ChangeFeed>();
  StreamPump pump(feed, ChangeTopic::kRunEvents, clock, 2, StreamPump::Wakes::kNever,
                  absl::Milliseconds(10));
  const absl::Time start = clock->Now();
  std::atomic<int> ran{0};
  for (int ms : {3, 7, 10, 14}) {
    pump.RunAfterChange(0, start + absl::Milliseconds(ms), [&] { ++ran; });
  }
  REQUIRE(clock->AwaitWaiters(1));
  clock->Advance(absl::Milliseconds(7));  // two moments passed, the tick not
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(pump.waiting() == 4);
  clock->Advance(absl::Milliseconds(3));  // the tick: the three due by then, at once
  for (int i = 0; i < 10'000 && ran.load() < 3; ++i) absl::SleepFor(absl::Milliseconds(1));
  CHECK(ran.load() == 3);
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(pump.waiting() == 1);
  clock->Advance(absl::Milliseconds(9));  // 19 ms: past 14, before the tick at 20
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(pump.waiting() == 1);
  clock->Advance(absl::Milliseconds(1));
  for (int i = 0; i < 10'000 && ran.load() < 4; ++i) absl::SleepFor(absl::Milliseconds(1));
  CHECK(ran.load() == 4);
  // kNever: the topic moving wakes nobody.
  pump.RunAfterChange(pump.Generation(), clock->Now() + absl::Hours(1), [&] { ++ran; });
  feed->Bump(ChangeTopic::kRunEvents);
  REQUIRE(clock->AwaitWaiters(1));
  CHECK(pump.waiting() == 1);
}

TEST_CASE("a stream that saw an older generation, or whose moment passed, runs at once") {
  Pumped p;
  const uint64_t seen = p.pump.Generation();
  p.feed->Bump(ChangeTopic::kLogs);  // between its read and its wait
  p.pump.RunAfterChange(seen, p.clock->Now() + absl::Hours(1), p.Count());
  CHECK(p.Ran(1));
  p.pump.RunAfterChange(p.pump.Generation(), p.clock->Now(), p.Count());
  CHECK(p.Ran(2));
  CHECK(p.pump.waiting() == 0);
}

TEST_CASE("waits end at their moments on the injected clock, earliest first") {
  Pumped p;
  const uint64_t seen = p.pump.Generation();
  const absl::Time start = p.clock->Now();
  std::atomic<int> order{0}, first{0}, second{0};
  p.pump.RunAfterChange(seen, start + absl::Seconds(10), [&] { second = ++order; });
  REQUIRE(p.clock->AwaitWaiters(1));
  // An earlier moment than the one the timer waits for wakes it.
  p.pump.RunAfterChange(seen, start + absl::Seconds(1), [&] { first = ++order; });
  REQUIRE(p.clock->AwaitWaiters(1));
  p.clock->Advance(absl::Milliseconds(999));
  REQUIRE(p.clock->AwaitWaiters(1));
  CHECK(p.pump.waiting() == 2);
  p.clock->Advance(absl::Milliseconds(1));
  for (int i = 0; i < 10'000 && first.load() == 0; ++i) absl::SleepFor(absl::Milliseconds(1));
  CHECK(first.load() == 1);
  CHECK(p.pump.waiting() == 1);
  p.clock->Advance(absl::Seconds(9));
  for (int i = 0; i < 10'000 && second.load() == 0; ++i) absl::SleepFor(absl::Milliseconds(1));
  CHECK(second.load() == 2);
  CHECK(p.pump.waiting() == 0);
}

TEST_CASE("WakeNow runs one waiting stream at once, and a stale ticket does nothing") {
  Pumped p;
  const uint64_t seen = p.pump.Generation();
  const auto a = p.pump.RunAfterChange(seen, p.clock->Now() + absl::Hours(1), p.Count());
  p.pump.RunAfterChange(seen, p.clock->Now() + absl::Hours(1), p.Count());
  p.pump.WakeNow(a);
  CHECK(p.Ran(1));
  CHECK(p.pump.waiting() == 1);
  p.pump.WakeNow(a);    // already ran
  p.pump.WakeNow(999);  // never given
  CHECK(p.pump.waiting() == 1);
  CHECK(p.ran.load() == 1);
}

TEST_CASE("a wait woken before it begins runs as soon as it begins") {
  Pumped p;
  const auto ticket = p.pump.Reserve();
  p.pump.WakeNow(ticket);  // news, or a cancel, before the wait is registered
  p.pump.RunAfterChange(ticket, p.pump.Generation(), p.clock->Now() + absl::Hours(1), p.Count());
  CHECK(p.Ran(1));
  CHECK(p.pump.waits_ended() == 1);
  // A reserved wait that nobody woke waits.
  const auto quiet = p.pump.Reserve();
  p.pump.RunAfterChange(quiet, p.pump.Generation(), p.clock->Now() + absl::Hours(1), p.Count());
  CHECK(p.pump.waiting() == 1);
}

TEST_CASE("a pump of foreign changes is woken by other writers' commits only") {
  auto clock = std::make_shared<FakeClock>();
  auto feed = std::make_shared<store::ChangeFeed>();
  StreamPump pump(feed, ChangeTopic::kLogs, clock, 1, StreamPump::Wakes::kForeignChanges);
  std::atomic<int> ran{0};
  pump.RunAfterChange(pump.Generation(), clock->Now() + absl::Hours(1), [&] { ++ran; });
  feed->Bump(ChangeTopic::kLogs);  // this process's own commit: its follows hear of it otherwise
  CHECK(pump.waiting() == 1);
  feed->BumpForeign(ChangeTopic::kLogs);
  for (int i = 0; i < 10'000 && ran.load() == 0; ++i) absl::SleepFor(absl::Milliseconds(1));
  CHECK(ran.load() == 1);
  CHECK(pump.waiting() == 0);
}

TEST_CASE("a pump goes with streams still waiting: their work is dropped, not run") {
  std::atomic<int> ran{0};
  auto feed = std::make_shared<store::ChangeFeed>();
  auto clock = std::make_shared<FakeClock>();
  {
    StreamPump pump(feed, ChangeTopic::kLogs, clock, 1);
    pump.RunAfterChange(pump.Generation(), clock->Now() + absl::Hours(1), [&] { ++ran; });
  }
  feed->Bump(ChangeTopic::kLogs);  // no listener left
  CHECK(ran.load() == 0);
}

}  // namespace stream_pump_test
}  // namespace tessera
