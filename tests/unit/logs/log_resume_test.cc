// A follow that ended goes on from its cursor (GetLogsRequest.resume, proto/policy/log_cursor.h):
// every line after what the client received, none of it again, whatever the lines' times; the
// cursor's errors name the field; a cursor as the token an SSE event carries as its id.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <initializer_list>
#include <map>
#include <tuple>

#include "absl/strings/escaping.h"
#include "proto/policy/log_cursor.h"
#include "tests/unit/logs/log_test_fixture.h"

namespace tessera::logs::testing {
namespace log_resume_test {

// What a client receives: the lines' texts, and its cursor.
struct Received {
  Texts texts;
  LogCursorKeeper cursor;
};

// Reads `req` as a client does, taking at most `at_most` lines before it goes away (the stream
// ended), and any start the service says.
absl::Status Read(Fixture& f, const v1::GetLogsRequest& req, Received& got,
                  size_t at_most = SIZE_MAX) {
  size_t taken = 0;
  return f.handler.GetLogs(
      f.alice, req,
      [&](const v1::LogLine& l) {
        if (taken == at_most) return false;
        ++taken;
        got.texts.push_back(l.text());
        got.cursor.Received(l);
        return true;
      },
      // A read goes to its end; a follow no further than its start (what is stored now).
      [&] { return req.follow(); }, nullptr, nullptr,
      [&](const v1::LogCursor& start) {
        got.cursor.Started(start);
        return true;
      });
}

// The read that goes on from what `got` received, to the end of what is stored.
v1::GetLogsRequest Resumed(v1::GetLogsRequest req, const Received& got) {
  req.clear_tail();
  req.set_follow(false);
  *req.mutable_resume() = got.cursor.Cursor();
  return req;
}

TEST_CASE("a resumed read goes on after its cursor: every line once, a lagging node's too") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 10, "a0"), f.Line(1, kOut, 0, 20, "b0"),
                  f.Line(0, kErr, 0, 30, "a-err0"), f.Line(0, kOut, 1, 40, "a1"),
                  f.Line(1, kOut, 1, 50, "b1")})
              .ok());
  Received got;
  REQUIRE(Read(f, Req(), got, 3).ok());
  CHECK(got.texts == Texts{"a0", "b0", "a-err0"});
  // Meanwhile rank 1's node, whose clock lags, sends lines printed before ones already shown; a
  // resume by time would lose them.
  REQUIRE(f.Push({f.Line(1, kOut, 2, 5, "b2 (lagging)"), f.Line(0, kOut, 2, 60, "a2"),
                  f.Line(1, kErr, 0, 6, "b-err0 (lagging)")},
                 "b2")
              .ok());
  REQUIRE(Read(f, Resumed(Req(), got), got).ok());
  Texts all = got.texts;
  std::sort(all.begin(), all.end());
  CHECK(all == Texts{"a-err0", "a0", "a1", "a2", "b-err0 (lagging)", "b0", "b1", "b2 (lagging)"});
  // Resumed again at the end: nothing more.
  Received after;
  after.cursor = got.cursor;
  REQUIRE(Read(f, Resumed(Req(), got), after).ok());
  CHECK(after.texts.empty());

  SECTION("with a filter: the lines it passes, once") {
    auto grep = Req();
    grep.set_grep("^a[0-9]");
    Received g;
    REQUIRE(Read(f, grep, g, 2).ok());
    CHECK(g.texts == Texts{"a0", "a1"});
    REQUIRE(Read(f, Resumed(grep, g), g).ok());
    CHECK(g.texts == Texts{"a0", "a1", "a2"});
  }
}

TEST_CASE(
    "a tail follow says where its streams start: a resume never shows what the tail left out") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  // Rank 1 printed early and nothing since: the tail of 2 holds only rank 0's lines.
  REQUIRE(f.Push({f.Line(1, kOut, 0, 1, "old b0"), f.Line(1, kOut, 1, 2, "old b1"),
                  f.Line(0, kOut, 0, 10, "a0"), f.Line(0, kOut, 1, 11, "a1"),
                  f.Line(0, kOut, 2, 12, "a2")})
              .ok());
  auto tail = Req();
  tail.set_tail(2);
  tail.set_follow(true);
  Received got;
  REQUIRE(Read(f, tail, got).ok());
  CHECK(got.texts == Texts{"a1", "a2"});
  REQUIRE(f.Push({f.Line(1, kOut, 2, 20, "b2"), f.Line(0, kOut, 3, 21, "a3")}, "more").ok());
  REQUIRE(Read(f, Resumed(tail, got), got).ok());
  CHECK(got.texts == Texts{"a1", "a2", "b2", "a3"});

  // Without the start the service sent, rank 1 would have started at its first line.
  Received lines_only;
  for (int i = 0; i < 2; ++i) lines_only.cursor.Received(f.Line(0, kOut, 1 + i, 0, ""));
  REQUIRE(Read(f, Resumed(tail, lines_only), lines_only).ok());
  CHECK(lines_only.texts == Texts{"old b0", "old b1", "b2", "a3"});
}

TEST_CASE("a resumed follow of a run that failed since shows every rank, as its first did") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "a0"), f.Line(1, kOut, 0, 2, "b0")}).ok());
  Received got;
  REQUIRE(Read(f, Req(), got).ok());
  auto d = f.AddRun("r", v1::RUN_STATUS_FAILED);
  d.mutable_attempts(0)->set_first_failed_rank(1);
  f.runs->Set(d);
  REQUIRE(f.Push({f.Line(0, kOut, 1, 3, "a1"), f.Line(1, kErr, 0, 4, "b boom")}, "end").ok());
  REQUIRE(Read(f, Resumed(Req(), got), got).ok());
  CHECK(got.texts == Texts{"a0", "b0", "a1", "b boom"});
  // A new request of the failed run shows its failed rank, as before.
  CHECK(f.Texts(Req()) == Texts{"b0", "b boom"});
}

TEST_CASE("a resume goes on in the cursor's attempt, whatever the latest is") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_RUNNING, 1);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "first 0", 0), f.Line(0, kOut, 1, 2, "first 1", 0),
                  f.Line(0, kOut, 0, 3, "second 0", 1)})
              .ok());
  v1::GetLogsRequest req = Req();
  req.mutable_resume()->set_resumption_index(0);
  auto* p = req.mutable_resume()->add_positions();
  p->set_rank(0);
  p->set_stream(kOut);
  p->set_next_sequence(1);
  CHECK(f.Texts(req) == Texts{"first 1"});
  req.set_resumption_index(0);  // agreeing with the cursor is fine
  CHECK(f.Texts(req) == Texts{"first 1"});
}

TEST_CASE("a bad cursor is one error naming what is wrong") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_RUNNING, 1);
  const auto error = [&](const std::function<void(v1::GetLogsRequest&)>& edit) {
    v1::GetLogsRequest req = Req();
    req.mutable_resume()->set_resumption_index(1);
    auto* p = req.mutable_resume()->add_positions();
    p->set_rank(0);
    p->set_stream(kOut);
    p->set_next_sequence(3);
    edit(req);
    Texts out;
    return f.Get(req, &out);
  };
  CHECK(error([](auto&) {}).ok());
  const std::map<std::string, std::function<void(v1::GetLogsRequest&)>> bad = {
      {"resume.positions[0].rank: must not be negative",
       [](auto& r) { r.mutable_resume()->mutable_positions(0)->set_rank(-1); }},
      {"resume.positions[0].stream: must be stdout or stderr",
       [](auto& r) {
         r.mutable_resume()->mutable_positions(0)->set_stream(v1::LOG_STREAM_UNSPECIFIED);
       }},
      {"resume.positions[0].next_sequence: must not be negative",
       [](auto& r) { r.mutable_resume()->mutable_positions(0)->set_next_sequence(-2); }},
      {"resume.positions[1]: rank 0's stdout is given twice",
       [](auto& r) { *r.mutable_resume()->add_positions() = r.resume().positions(0); }},
      {"resume.resumption_index: must not be negative",
       [](auto& r) { r.mutable_resume()->set_resumption_index(-1); }},
      {"resume: cannot be combined with tail or first_exception", [](auto& r) { r.set_tail(10); }},
      {"resume: the cursor names the attempt", [](auto& r) { r.set_previous(true); }},
      {"resume: the cursor names the attempt", [](auto& r) { r.set_resumption_index(0); }},
  };
  for (const auto& [message, edit] : bad) {
    const absl::Status st = error(edit);
    INFO(message << " -> " << st);
    CHECK(absl::IsInvalidArgument(st));
    CHECK(st.message().find(message) != std::string::npos);
  }
  const absl::Status beyond = error([](auto& r) { r.mutable_resume()->set_resumption_index(2); });
  CHECK(absl::IsNotFound(beyond));
  CHECK(beyond.message().find("no attempt 2") != std::string::npos);
}

TEST_CASE(
    "a client's cursor: the highest sequence of each stream, started again by a new attempt") {
  Fixture f;
  LogCursorKeeper keeper;
  CHECK(keeper.empty());
  keeper.Received(f.Line(0, kOut, 4, 0, ""));
  keeper.Received(f.Line(0, kOut, 2, 0, ""));  // out of order: the highest counts
  keeper.Received(f.Line(3, kErr, 0, 0, ""));
  v1::LogCursor start;
  start.set_resumption_index(0);
  auto* p = start.add_positions();
  p->set_rank(5);
  p->set_stream(kOut);
  p->set_next_sequence(7);
  keeper.Started(start);
  v1::LogCursor c = keeper.Cursor();
  CHECK(c.resumption_index() == 0);
  REQUIRE(c.positions_size() == 3);
  CHECK((c.positions(0).rank() == 0 && c.positions(0).next_sequence() == 5));
  CHECK((c.positions(1).rank() == 3 && c.positions(1).stream() == kErr &&
         c.positions(1).next_sequence() == 1));
  CHECK((c.positions(2).rank() == 5 && c.positions(2).next_sequence() == 7));
  keeper.Received(f.Line(1, kOut, 0, 0, "", /*resumption=*/1));
  c = keeper.Cursor();
  CHECK(c.resumption_index() == 1);
  REQUIRE(c.positions_size() == 1);
  CHECK((c.positions(0).rank() == 1 && c.positions(0).next_sequence() == 1));
}

v1::LogCursor CursorOf(int32_t resumption,
                       std::initializer_list<std::tuple<int32_t, v1::LogStream, int64_t>> at) {
  LogCursorPositions positions;
  for (const auto& [rank, stream, next] : at)
    positions[{rank, static_cast<int32_t>(stream)}] = next;
  return MakeLogCursor(resumption, positions);
}

TEST_CASE("a cursor as a token: the same cursor back, about 4 bytes a position") {
  const v1::LogCursor small = CursorOf(3, {{0, kOut, 5}, {0, kErr, 0}, {7, kOut, 1'000'000}});
  const std::string token = LogCursorToken(small);
  CHECK(token.rfind("c1.", 0) == 0);
  for (char c : token.substr(3)) {
    INFO(token);
    CHECK((std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'));
  }
  auto back = ReadLogCursorToken(token);
  REQUIRE(back.ok());
  CHECK(back->SerializeAsString() == small.SerializeAsString());

  // Every stream of 700 ranks, 100,000 lines printed each: under the gateway's 8 KiB.
  LogCursorPositions many;
  for (int32_t rank = 0; rank < 700; ++rank) {
    many[{rank, kOut}] = 100'000 + rank;
    many[{rank, kErr}] = rank;
  }
  const v1::LogCursor big = MakeLogCursor(0, many);
  const std::string big_token = LogCursorToken(big);
  CHECK(big_token.size() < std::size_t{8} << 10);
  auto big_back = ReadLogCursorToken(big_token);
  REQUIRE(big_back.ok());
  CHECK(big_back->SerializeAsString() == big.SerializeAsString());

  // Positions in any order make the same token; none is a cursor of the attempt alone.
  v1::LogCursor shuffled = small;
  std::swap(*shuffled.mutable_positions(0), *shuffled.mutable_positions(2));
  CHECK(LogCursorToken(shuffled) == token);
  auto empty = ReadLogCursorToken(LogCursorToken(CursorOf(2, {})));
  REQUIRE(empty.ok());
  CHECK((empty->resumption_index() == 2 && empty->positions_size() == 0));
  // The largest rank and sequence survive.
  const v1::LogCursor edge = CursorOf(0, {{INT32_MAX, kErr, INT64_MAX}});
  auto edge_back = ReadLogCursorToken(LogCursorToken(edge));
  REQUIRE(edge_back.ok());
  CHECK(edge_back->SerializeAsString() == edge.SerializeAsString());
}

TEST_CASE("a token that is not a cursor is refused, saying why") {
  const std::string good = LogCursorToken(CursorOf(1, {{0, kOut, 5}, {1, kOut, 2}}));
  std::string bytes;
  REQUIRE(absl::WebSafeBase64Unescape(good.substr(3), &bytes));
  auto token_of = [](std::string raw) { return "c1." + absl::WebSafeBase64Escape(raw); };
  const std::pair<std::string, std::string> cases[] = {
      {"", "does not start with"},
      {"12", "does not start with"},
      {"c2." + good.substr(3), "does not start with"},
      {"c1.***", "not base64url"},
      {"c1.", "attempt is missing"},
      {token_of(bytes.substr(0, bytes.size() - 1)), "cut short"},
      // A second position at the same key as the first (step 0).
      {token_of(std::string("\x01\x00\x05\x00\x02", 5)), "given twice"},
      // A step past the largest rank.
      {token_of(std::string("\x00\xff\xff\xff\xff\x7f\x00", 7)), "out of range"},
  };
  for (const auto& [token, why] : cases) {
    INFO(token);
    auto read = ReadLogCursorToken(token);
    REQUIRE_FALSE(read.ok());
    CHECK(absl::IsInvalidArgument(read.status()));
    CHECK_THAT(std::string(read.status().message()), Catch::Contains(why));
  }
}

}  // namespace log_resume_test
}  // namespace tessera::logs::testing
