// RunEventTail: the events every open watch reads, read from the store once for all of them, and
// each watch woken only by what it would be sent. Over the in-memory stores and their change
// feed; runs made by the run manager as users make them.
#include "services/runs/run_event_tail.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <map>

#include "services/runs/run_change_watch.h"
#include "tests/support/poll_until.h"
#include "tests/unit/runs/run_manager_fixture.h"

namespace tessera::runs {
namespace run_event_tail_test {

using testing::Fixture;

// What the test waits at most for something that should come at once.
constexpr absl::Duration kPatience = absl::Seconds(30);

struct TailFixture : Fixture {
  explicit TailFixture(RunEventTailOptions options = {})
      : tail(stores.runs, stores.changes, clock, options) {}

  // A watcher whose wake counts.
  struct Watcher {
    RunEventTail::WatcherId id;
    std::shared_ptr<std::atomic<int>> woken = std::make_shared<std::atomic<int>>(0);
  };
  Watcher Watch(const auth::Principal& who, v1::RunFilter filter = {}) {
    Watcher w{tail.AddWatcher(who, std::move(filter))};
    return w;
  }
  void Wait(const Watcher& w, int64_t after) {
    tail.WakeWhenNews(w.id, after, [woken = w.woken] { ++*woken; });
  }
  static bool WaitForWake(const Watcher& w) {
    return tessera::testing::PollUntil([&] { return *w.woken > 0; }, kPatience);
  }
  std::vector<std::string> RunsAfter(int64_t after) {
    auto entries = tail.After(after, 500);
    REQUIRE(entries.ok());
    std::vector<std::string> names;
    for (const auto& e : *entries) names.push_back(e->run ? e->run->name() : "(deleted)");
    return names;
  }

  RunEventTail tail;
};

TEST_CASE("the watches of a cluster share one read of the store per commit") {
  TailFixture f;
  const int64_t start = *f.tail.Newest();
  constexpr int kWatches = 200;
  std::vector<TailFixture::Watcher> watches;
  for (int i = 0; i < kWatches; ++i) {
    watches.push_back(f.Watch(f.alice));
    f.Wait(watches.back(), start);
  }
  const uint64_t reads_before = f.tail.reads();
  const uint64_t commits_before = f.stores.changes->Generation(store::ChangeTopic::kRunEvents);
  f.Submit(f.alice, "shared");
  for (const auto& w : watches) REQUIRE(TailFixture::WaitForWake(w));
  for (int i = 0; i < kWatches; ++i) {
    const auto names = f.RunsAfter(start);
    REQUIRE(!names.empty());
    CHECK(names.front().rfind("shared-", 0) == 0);
  }
  // One read per move of the feed at most, whatever the number of watches.
  const uint64_t commits =
      f.stores.changes->Generation(store::ChangeTopic::kRunEvents) - commits_before;
  const uint64_t reads = f.tail.reads() - reads_before;
  INFO(reads << " reads for " << commits << " commits and " << kWatches << " watches");
  CHECK(reads >= 1);
  CHECK(reads <= commits);
  for (int i = 0; i < kWatches; ++i) CHECK(*watches[i].woken == 1);  // once each
}

TEST_CASE("a watch is woken only by a change it would be sent") {
  TailFixture f;
  const int64_t start = *f.tail.Newest();
  auto alice = f.Watch(f.alice);
  auto bob = f.Watch(f.bob);
  auto operator_ = f.Watch(auth::Principal("olga", v1::ROLE_OPERATOR));
  v1::RunFilter only_x;
  only_x.add_name_globs("x*");
  auto bob_x = f.Watch(f.bob, only_x);
  for (const auto* w : {&alice, &bob, &operator_, &bob_x}) f.Wait(*w, start);

  f.Submit(f.bob, "y");
  REQUIRE(TailFixture::WaitForWake(bob));
  REQUIRE(TailFixture::WaitForWake(operator_));
  // Removing a watcher waits for the wakes being called: what was not called by then was not
  // taken.
  f.tail.RemoveWatcher(alice.id);
  f.tail.RemoveWatcher(bob_x.id);
  CHECK(*alice.woken == 0);  // another user's run
  CHECK(*bob_x.woken == 0);  // not matching the filter

  SECTION("a removed watch is never woken") {
    f.Wait(bob, *f.tail.Newest());
    f.Submit(f.alice, "x");  // would have woken alice's watch and not bob's
    f.Submit(f.bob, "x");
    REQUIRE(TailFixture::WaitForWake(bob));
    f.tail.RemoveWatcher(bob.id);
    CHECK(*alice.woken == 0);
    CHECK(*bob_x.woken == 0);
  }
  SECTION("news held before the wait wakes it at once") {
    auto late = f.Watch(f.bob);
    f.Wait(late, start);  // bob's run "y" is after `start` and held
    CHECK(*late.woken == 1);
    auto nothing = f.Watch(f.alice);
    f.Wait(nothing, start);
    CHECK(*nothing.woken == 0);
  }
}

TEST_CASE("a commit the feed missed is seen once what the tail holds is older than fresh_for") {
  Fixture f;
  // A feed that hears nothing: the store's commits go to its own.
  RunEventTail tail(f.stores.runs, std::make_shared<store::ChangeFeed>(), f.clock,
                    RunEventTailOptions{.fresh_for = absl::Milliseconds(200)});
  const int64_t start = *tail.Newest();
  f.Submit(f.alice, "missed");
  CHECK(tail.After(start, 500)->empty());  // held 0 ms ago: answered from memory
  f.clock->Advance(absl::Milliseconds(200));
  auto entries = tail.After(start, 500);
  REQUIRE(entries.ok());
  REQUIRE(!entries->empty());
  CHECK(entries->front()->run->name().rfind("missed-", 0) == 0);
}

TEST_CASE("a watch further behind than the tail holds reads the store, and misses nothing") {
  TailFixture f(RunEventTailOptions{.max_events = 2});
  const int64_t start = *f.tail.Newest();
  auto w = f.Watch(f.alice);
  for (int i = 0; i < 4; ++i) {
    f.Submit(f.alice, absl::StrCat("r", i));
    // Each read of the tail, one after the other (a watch's step makes one if the feed's has not).
    f.clock->Advance(absl::Seconds(1));
    REQUIRE(f.tail.After(start, 500).ok());
  }
  auto all = f.stores.runs->ListAllEvents(start, 0);
  REQUIRE(all.ok());
  REQUIRE(all->size() >= 4);
  std::vector<int64_t> seen;
  for (int64_t after = start;;) {
    auto page = f.tail.After(after, 500);
    REQUIRE(page.ok());
    if (page->empty()) break;
    for (const auto& e : *page) seen.push_back(e->event.id());
    after = seen.back();
  }
  std::vector<int64_t> want;
  for (const auto& e : *all) want.push_back(e.id());
  CHECK(seen == want);
  // And a wait that begins behind what is held is woken at once: it has the store to read.
  f.Wait(w, start);
  CHECK(*w.woken == 1);
}

TEST_CASE("a tail nobody watches reads nothing per commit, and a new watch starts at the newest") {
  TailFixture f;
  auto first = f.Watch(f.alice);
  REQUIRE(f.tail.Newest().ok());
  f.tail.RemoveWatcher(first.id);
  const uint64_t reads = f.tail.reads();
  for (int i = 0; i < 3; ++i) f.Submit(f.bob, absl::StrCat("unwatched", i));
  CHECK(f.tail.reads() == reads);  // told of each commit, read none
  auto second = f.Watch(f.alice);
  auto newest = f.tail.Newest();
  REQUIRE(newest.ok());
  CHECK(*newest == *f.tail.NewestInStore());
  CHECK(f.tail.reads() == reads + 1);
  CHECK(f.RunsAfter(*newest).empty());
  f.Submit(f.alice, "watched");
  f.Wait(second, *newest);
  REQUIRE(TailFixture::WaitForWake(second));
  CHECK(f.RunsAfter(*newest).front().rfind("watched-", 0) == 0);
}

TEST_CASE("a watch is sent a run's summary and its event, filtered on its metadata") {
  TailFixture f;
  const int64_t start = *f.tail.Newest();
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("tagged");
  req.mutable_spec()->set_command(std::string(100'000, 'c'));
  req.mutable_spec()->mutable_compute()->set_gpus(8);
  (*req.mutable_spec()->mutable_metadata())["team"] = "nlp";
  v1::EnvVar& env = *req.mutable_spec()->add_env_variables();
  env.set_key("TOKEN");
  env.set_value("not for watchers");
  v1::SubmitRunResponse resp;
  REQUIRE(f.manager.SubmitRun(f.alice, req, &resp).ok());
  f.clock->Advance(absl::Seconds(1));
  auto entries = f.tail.After(start, 500);
  REQUIRE(entries.ok());
  REQUIRE(!entries->empty());
  const auto& entry = *entries->front();

  v1::RunFilter nlp, vision;
  (*nlp.mutable_metadata())["team"] = "nlp";
  (*vision.mutable_metadata())["team"] = "vision";
  CHECK(RunEventTail::Sends(f.alice, nlp, entry));
  CHECK_FALSE(RunEventTail::Sends(f.alice, vision, entry));
  CHECK_FALSE(RunEventTail::Sends(f.bob, nlp, entry));

  const v1::RunChange change = RunEventTail::ChangeFor(entry);
  CHECK(change.run().name() == resp.run().name());
  CHECK(change.event().id() == entry.event.id());
  CHECK(change.run().spec().command().empty());
  CHECK(change.run().spec().env_variables().empty());
  CHECK(change.run().spec().metadata().empty());  // as lists carry runs
}

}  // namespace run_event_tail_test
}  // namespace tessera::runs

namespace tessera::runs {
namespace run_event_tail_test {

TEST_CASE("idle watches step at moments of their own, spread over the check interval") {
  testing::Fixture f;
  auto tail = std::make_shared<RunEventTail>(f.stores.runs, f.stores.changes, f.clock);
  constexpr absl::Duration kCheck = absl::Seconds(1);
  const absl::Time now = f.clock->Now();
  std::vector<std::unique_ptr<RunChangeWatch>> watches;
  std::vector<absl::Time> moments;
  for (int i = 0; i < 20; ++i) {
    auto w = std::make_unique<RunChangeWatch>(tail, f.stores.changes, f.clock, f.alice,
                                              v1::RunFilter{}, kCheck);
    w->UseTailWakes(kCheck);
    std::deque<v1::RunChange> out;
    REQUIRE(w->Step(out, [] { return false; }).headers);  // the start
    const StreamStep idle = w->Step(out, [] { return false; });
    REQUIRE(idle.kind == StreamStep::Kind::kWait);
    CHECK(idle.until > now);
    CHECK(idle.until <= now + kCheck);
    moments.push_back(idle.until);
    watches.push_back(std::move(w));
  }
  const absl::Time first_moment = moments.front();  // watches.front()'s
  // No two alike, and no tenth of the second holds more than a fair share.
  std::sort(moments.begin(), moments.end());
  CHECK(std::adjacent_find(moments.begin(), moments.end()) == moments.end());
  std::map<int64_t, int> per_tenth;
  for (absl::Time t : moments) ++per_tenth[absl::ToInt64Milliseconds(t - now) / 100];
  for (const auto& [tenth, n] : per_tenth) CHECK(n <= 3);
  // A watch keeps to its moment, whatever woke it meanwhile.
  f.clock->Advance(absl::Milliseconds(250));
  std::deque<v1::RunChange> out;
  const StreamStep again = watches.front()->Step(out, [] { return false; });
  const bool on_its_moment = again.until == first_moment || again.until == first_moment + kCheck;
  CHECK(on_its_moment);
}

}  // namespace run_event_tail_test
}  // namespace tessera::runs
