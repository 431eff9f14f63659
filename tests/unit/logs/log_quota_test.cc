// Per-run log quotas: a rate with bursts and a total; dropped lines become one marker line per
// stretch of a stream, which readers see in their place, with no gap; other runs are not
// touched. Then the retention of finished runs' logs.
#include "services/logs/log_quota.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "proto/policy/packed_log_lines.h"
#include "services/logs/log_reader.h"
#include "tests/unit/logs/log_test_fixture.h"

namespace tessera::logs::testing {
namespace log_quota_test {

LogHandlerOptions Quota(int64_t per_second, int64_t total) {
  LogHandlerOptions o;
  o.quota.bytes_per_second = per_second;
  o.quota.burst = absl::Seconds(1);
  o.quota.max_bytes = total;
  return o;
}

std::string Tenth(int i) { return std::string(9, static_cast<char>('a' + i % 26)) + "\n"; }

TEST_CASE("packed lines within the rate pass whole and a group over it is dropped line by line") {
  Fixture f(Quota(/*per_second=*/100, /*total=*/0));
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  // 60 bytes of rank 0's stdout fit the burst of 100 and pass as they came; of rank 1's 60,
  // the first 4 lines take the 40 left and the other 2 become a marker.
  std::vector<v1::LogLine> r0, r1;
  for (int i = 0; i < 6; ++i) r0.push_back(f.Line(0, kOut, i, i, Tenth(i)));
  for (int i = 0; i < 6; ++i) r1.push_back(f.Line(1, kOut, i, 10 + i, Tenth(10 + i)));
  REQUIRE(f.PushPacked({r0, r1}, "b1").ok());
  auto texts = f.Texts(Req());
  REQUIRE(texts.size() == 11);
  CHECK(texts[5] == Tenth(5));
  CHECK(texts[9] == Tenth(13));
  CHECK(absl::StartsWith(texts[10], "[tessera] 2 lines dropped"));
  auto streams = f.stores.logs->ListLogStreams("id-r", 0);
  REQUIRE(streams.ok());
  for (const auto& s : *streams) CHECK(s.durable_sequence == 5);  // no gap in either
  // Resent whole: not stored again, and dropped again (the rate is spent), no second marker.
  REQUIRE(f.PushPacked({r0, r1}, "b1").ok());
  CHECK(f.Texts(Req()).size() == 11);
}

TEST_CASE("lines over a run's rate are dropped, one marker per stretch, and the rate refills") {
  Fixture f(Quota(/*per_second=*/100, /*total=*/0));
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  f.AddRun("quiet", v1::RUN_STATUS_RUNNING);
  // 30 lines of 10 bytes: the burst (100 bytes) lets 10 through; the other 20 are dropped.
  std::vector<v1::LogLine> lines;
  for (int i = 0; i < 30; ++i) lines.push_back(f.Line(0, kOut, i, i, Tenth(i)));
  lines.push_back(f.Line(0, kOut, 0, 40, "other run\n", 0, "quiet"));
  REQUIRE(f.Push(lines, "b1").ok());
  auto texts = f.Texts(Req());
  REQUIRE(texts.size() == 11);
  CHECK(texts[9] == Tenth(9));
  CHECK(absl::StartsWith(texts[10], "[tessera] 20 lines dropped"));
  CHECK(absl::StrContains(texts[10], "log rate quota of 100B/s"));
  CHECK(f.Texts(Req("quiet")) == Texts{"other run\n"});

  // The marker stands for sequences 10..29: the stream has no gap, and goes on after it.
  auto stored = f.stores.logs->ReadLogs({.run_id = "id-r"});
  REQUIRE(stored.ok());
  const v1::LogLine& marker = stored->back();
  CHECK(marker.sequence() == 29);
  CHECK(marker.dropped_lines() == 20);
  auto streams = f.stores.logs->ListLogStreams("id-r", 0);
  REQUIRE(streams.ok());
  CHECK((*streams)[0].durable_sequence == 29);

  // Half a second later, 50 bytes more may pass.
  f.clock->Advance(absl::Milliseconds(500));
  lines.clear();
  for (int i = 30; i < 40; ++i) lines.push_back(f.Line(0, kOut, i, i + 100, Tenth(i)));
  REQUIRE(f.Push(lines, "b2").ok());
  texts = f.Texts(Req());
  REQUIRE(texts.size() == 17);
  CHECK(texts[15] == Tenth(34));
  CHECK(absl::StartsWith(texts[16], "[tessera] 5 lines dropped"));
  CHECK((*f.stores.logs->ListLogStreams("id-r", 0))[0].durable_sequence == 39);
}

TEST_CASE("a run's total is kept across attempts, at it, every further line is dropped") {
  Fixture f(Quota(0, /*total=*/50));
  f.AddRun("r", v1::RUN_STATUS_RUNNING, 1);
  std::vector<v1::LogLine> lines;
  for (int i = 0; i < 3; ++i) lines.push_back(f.Line(0, kOut, i, i, Tenth(i)));
  REQUIRE(f.Push(lines, "a0").ok());
  lines.clear();
  // Attempt 1, two ranks: 20 bytes are left for the run.
  for (int i = 0; i < 4; ++i) {
    lines.push_back(f.Line(0, kOut, i, 10 + i, Tenth(i), 1));
    lines.push_back(f.Line(1, kErr, i, 10 + i, Tenth(i), 1));
  }
  REQUIRE(f.Push(lines, "a1").ok());
  auto texts = f.Texts(Req());  // attempt 1
  REQUIRE(texts.size() == 4);
  CHECK(texts[0] == Tenth(0));
  CHECK(texts[1] == Tenth(0));
  // Each stream has its marker; a stream's stretch stays one marker.
  int markers = 0;
  for (const auto& t : texts) {
    if (absl::StartsWith(t,
                         "[tessera] 3 lines dropped: this run's logs reached their quota of 50B")) {
      ++markers;
    }
  }
  CHECK(markers == 2);
  CHECK(*f.stores.logs->RunLogBytes("id-r") <= 50 + 2 * 80);
  // A short line that would fit in what is left is dropped too: the quota was reached.
  REQUIRE(f.Push({f.Line(0, kOut, 4, 20, "x", 1)}, "a2").ok());
  texts = f.Texts(Req());
  CHECK(std::find(texts.begin(), texts.end(), "x") == texts.end());
  CHECK(absl::StartsWith(texts.back(), "[tessera] 1 line dropped"));
}

TEST_CASE("a resent batch over the quota changes nothing stored") {
  Fixture f(Quota(0, /*total=*/20));
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  std::vector<v1::LogLine> lines;
  for (int i = 0; i < 5; ++i) lines.push_back(f.Line(0, kOut, i, i, Tenth(i)));
  REQUIRE(f.Push(lines, "b1").ok());
  const auto before = f.Texts(Req());
  REQUIRE(f.Push(lines, "b1").ok());
  CHECK(f.Texts(Req()) == before);
  CHECK(before.size() == 3);
}

TEST_CASE("a follower sees a marker in the place of the dropped lines, without waiting") {
  LogHandlerOptions o = Quota(0, 30);
  o.gap_timeout = absl::Hours(1);  // a gap would make the reader wait
  Fixture f(o);
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  std::vector<v1::LogLine> lines;
  for (int i = 0; i < 6; ++i) lines.push_back(f.Line(0, kOut, i, i, Tenth(i)));
  REQUIRE(f.Push(lines).ok());
  store::LogQuery q{.run_id = "id-r"};
  LogReader reader(f.stores.logs, q, f.clock, o.gap_timeout);
  auto page = reader.Next(/*skip_gaps=*/false);
  REQUIRE(page.ok());
  CHECK_FALSE(page->waiting_on_gap);
  REQUIRE(page->lines.size() == 4);
  CHECK(page->lines[3]->dropped_lines() == 3);
}

TEST_CASE("the logs of a run that ended long ago are removed, and readers told when") {
  LogHandlerOptions o;
  o.retention = absl::Hours(24 * 7);
  Fixture f(o);
  auto ended = f.AddRun("old", v1::RUN_STATUS_COMPLETED);
  auto silent = f.AddRun("silent", v1::RUN_STATUS_RUNNING);
  f.AddRun("recent", v1::RUN_STATUS_FAILED);
  const absl::Time t0 = f.clock->Now();
  *ended.mutable_run()->mutable_ended_at() = ToProtoTime(t0);
  f.runs->Set(ended);
  // Lines printed at t0 (Line's times are around 1'700'000'000).
  REQUIRE(f.Push({f.Line(0, kOut, 0, 0, "old line", 0, "old"),
                  f.Line(0, kOut, 0, 0, "silent line", 0, "silent")})
              .ok());
  f.clock->Advance(absl::Hours(24 * 6));
  CHECK(*f.handler.ExpireOldLogs() == 0);
  auto recent = f.runs->Get("recent");
  *recent.mutable_run()->mutable_ended_at() = ToProtoTime(f.clock->Now());
  f.runs->Set(recent);
  f.clock->Advance(absl::Hours(24 * 2));
  REQUIRE(f.Push({f.Line(0, kOut, 0, 0, "recent line", 0, "recent")}).ok());
  // "old" ended 8 days ago: its logs go. "silent" is still running: kept, however quiet.
  // "recent" printed (by its lines' times) long ago but ended just now: kept.
  CHECK(*f.handler.ExpireOldLogs() == 1);
  std::vector<std::string> texts;
  const auto st = f.Get(Req("old"), &texts);
  REQUIRE(absl::IsFailedPrecondition(st));
  CHECK(absl::StrContains(st.message(), "were removed at"));
  CHECK(f.Texts(Req("silent")) == Texts{"silent line"});
  CHECK(f.Texts(Req("recent")) == Texts{"recent line"});
}

}  // namespace log_quota_test
}  // namespace tessera::logs::testing
