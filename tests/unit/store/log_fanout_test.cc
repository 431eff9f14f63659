// The in-memory fan-out of committed log lines to a process's followers (log_fanout.h).
#include "services/store/log_fanout.h"

#include <catch2/catch.hpp>

#include "base/log_line_codec.h"

namespace tessera::store {
namespace log_fanout_test {

v1::LogLine Line(const std::string& run, int resumption, int64_t seq, int nanos = 0) {
  v1::LogLine l;
  l.set_run_id(run);
  l.set_resumption_index(resumption);
  l.set_stream(v1::LOG_STREAM_STDOUT);
  l.set_sequence(seq);
  l.mutable_time()->set_seconds(1'700'000'000);
  l.mutable_time()->set_nanos(nanos);
  l.set_text("line " + std::to_string(seq));
  return l;
}

LogBatchToStore Lines(std::vector<v1::LogLine> lines) { return {.lines = std::move(lines)}; }

// The lines' sequences, plain ones then packed ones of each batch.
std::vector<int64_t> Sequences(const LogSubscription::Taken& taken) {
  std::vector<int64_t> out;
  for (const auto& batch : taken.batches) {
    for (const auto& l : batch->lines) out.push_back(l.sequence());
    for (const auto& g : batch->packed) {
      REQUIRE(
          ForEachChunkLine(g.lines(), [&](const ChunkLine& l) { out.push_back(l.sequence); }).ok());
    }
  }
  return out;
}

v1::PackedLogLines Packed(const std::string& run, int resumption, int64_t from, int64_t to) {
  v1::PackedLogLines g;
  g.set_run_id(run);
  g.set_resumption_index(resumption);
  g.set_stream(v1::LOG_STREAM_STDOUT);
  for (int64_t seq = from; seq < to; ++seq) {
    AppendChunkLine({.sequence = seq, .micros = 1, .dropped = 0, .text = "packed"},
                    *g.mutable_lines());
  }
  return g;
}

TEST_CASE("the fan-out hands a follower its attempt's lines, once, in the order published") {
  auto feed = std::make_shared<ChangeFeed>();
  LogFanout fanout(feed);

  SECTION("nobody follows: nothing is kept and nobody is woken") {
    const uint64_t seen = feed->Generation(ChangeTopic::kLogs);
    fanout.Publish(Lines({Line("r1", 0, 0)}));
    CHECK(feed->Generation(ChangeTopic::kLogs) == seen);
  }
  SECTION("only the subscribed attempt's lines, as a read returns them (microseconds)") {
    auto sub = fanout.Subscribe("r1", 0);
    const uint64_t seen = feed->Generation(ChangeTopic::kLogs);
    fanout.Publish(
        Lines({Line("r1", 0, 0, 1'234'567), Line("r1", 1, 0), Line("r2", 0, 0), Line("r1", 0, 1)}));
    CHECK(feed->Generation(ChangeTopic::kLogs) != seen);  // followers woken
    auto taken = sub->Take();
    CHECK(taken.complete);
    CHECK(Sequences(taken) == std::vector<int64_t>{0, 1});
    CHECK(taken.batches[0]->lines.at(0).time().nanos() == 1'234'000);
    CHECK(Sequences(sub->Take()).empty());  // taken once
    fanout.Publish(Lines({Line("r1", 0, 2)}));
    fanout.Publish(Lines({Line("r1", 0, 3)}));
    CHECK(Sequences(sub->Take()) == std::vector<int64_t>{2, 3});
  }
  SECTION("two followed attempts whose lines alternate in a batch: each gets its own, in order") {
    auto a = fanout.Subscribe("r1", 0);
    auto b = fanout.Subscribe("r2", 0);
    fanout.Publish(Lines({Line("r1", 0, 0), Line("r1", 0, 1), Line("r2", 0, 0), Line("r1", 0, 2),
                          Line("r3", 0, 0), Line("r2", 0, 1, 999)}));
    CHECK(Sequences(a->Take()) == std::vector<int64_t>{0, 1, 2});
    auto taken = b->Take();
    CHECK(Sequences(taken) == std::vector<int64_t>{0, 1});
    CHECK(taken.batches[0]->lines.at(1).time().nanos() == 0);  // 999 ns: under a microsecond
    CHECK(taken.batches[0]->lines.at(1).text() == "line 1");
  }
  SECTION("followers of one attempt share one copy of a batch") {
    auto a = fanout.Subscribe("r1", 0);
    auto b = fanout.Subscribe("r1", 0);
    fanout.Publish(Lines({Line("r1", 0, 0)}));
    auto ta = a->Take(), tb = b->Take();
    REQUIRE(ta.batches.size() == 1);
    REQUIRE(tb.batches.size() == 1);
    CHECK(ta.batches[0] == tb.batches[0]);
  }
  SECTION("a commit elsewhere makes the next take incomplete, once") {
    auto sub = fanout.Subscribe("r1", 0);
    CHECK(sub->Take().complete);
    feed->BumpForeign(ChangeTopic::kLogs);
    fanout.Publish(Lines({Line("r1", 0, 0)}));
    auto taken = sub->Take();
    CHECK_FALSE(taken.complete);
    CHECK(Sequences(taken) == std::vector<int64_t>{0});
    CHECK(sub->Take().complete);
    feed->Bump(ChangeTopic::kLogs);  // this bundle's own commit: nothing to read
    CHECK(sub->Take().complete);
  }
  SECTION("changes that may have been missed make it incomplete") {
    auto sub = fanout.Subscribe("r1", 0);
    feed->BumpAll();
    CHECK_FALSE(sub->Take().complete);
  }
  SECTION("a store call that failed makes every follower read") {
    auto sub = fanout.Subscribe("r1", 0);
    auto other = fanout.Subscribe("r2", 3);
    fanout.Publish(Lines({Line("r1", 0, 0)}));
    fanout.Invalidate();
    auto taken = sub->Take();
    CHECK_FALSE(taken.complete);
    CHECK(taken.batches.empty());
    CHECK_FALSE(other->Take().complete);
    CHECK(sub->Take().complete);
  }
  SECTION("a subscription that is gone is no longer fed") {
    auto sub = fanout.Subscribe("r1", 0);
    sub.reset();
    const uint64_t seen = feed->Generation(ChangeTopic::kLogs);
    fanout.Publish(Lines({Line("r1", 0, 0)}));
    CHECK(feed->Generation(ChangeTopic::kLogs) == seen);
  }
}

TEST_CASE("a follower too far behind loses its queue and is told to read") {
  auto feed = std::make_shared<ChangeFeed>();
  // Room for 3 of these lines (the queue is bounded in bytes).
  LogFanout fanout(feed, 3 * LogFanout::QueuedBytes(Lines({Line("r1", 0, 0)})));
  auto slow = fanout.Subscribe("r1", 0);
  auto quick = fanout.Subscribe("r1", 0);
  fanout.Publish(Lines({Line("r1", 0, 0), Line("r1", 0, 1)}));
  CHECK(Sequences(quick->Take()) == std::vector<int64_t>{0, 1});
  fanout.Publish(Lines({Line("r1", 0, 2), Line("r1", 0, 3)}));  // slow: 4 queued, over 3
  fanout.Publish(Lines({Line("r1", 0, 4)}));                    // not queued: it reads anyway
  auto taken = slow->Take();
  CHECK_FALSE(taken.complete);
  CHECK(taken.batches.empty());
  auto kept_up = quick->Take();
  CHECK(kept_up.complete);
  CHECK(Sequences(kept_up) == std::vector<int64_t>{2, 3, 4});
  // After its read it is fed again.
  fanout.Publish(Lines({Line("r1", 0, 5)}));
  auto again = slow->Take();
  CHECK(again.complete);
  CHECK(Sequences(again) == std::vector<int64_t>{5});
}

TEST_CASE("packed groups go to their attempt's followers still packed, and count by their bytes") {
  auto feed = std::make_shared<ChangeFeed>();
  // Room for a group of 5 lines, not for it and then one of 6.
  LogFanout fanout(
      feed,
      LogFanout::QueuedBytes({.packed = {Packed("r1", 0, 5, 10), Packed("r1", 0, 10, 16)}}) - 1);
  auto sub = fanout.Subscribe("r1", 0);
  fanout.Publish({.lines = {Line("r1", 0, 0)},
                  .packed = {Packed("r1", 0, 1, 5), Packed("r2", 0, 0, 3), Packed("r1", 1, 0, 2)}});
  auto taken = sub->Take();
  CHECK(taken.complete);
  REQUIRE(taken.batches.size() == 1);
  CHECK(taken.batches[0]->lines.size() == 1);
  CHECK(taken.batches[0]->packed.size() == 1);  // r1 attempt 0's only
  CHECK(Sequences(taken) == std::vector<int64_t>{0, 1, 2, 3, 4});
  // 5 lines fit; 6 more do not: the queue goes, and the follower reads.
  fanout.Publish({.packed = {Packed("r1", 0, 5, 10)}});
  fanout.Publish({.packed = {Packed("r1", 0, 10, 16)}});
  auto behind = sub->Take();
  CHECK_FALSE(behind.complete);
  CHECK(behind.batches.empty());
}

}  // namespace log_fanout_test
}  // namespace tessera::store
