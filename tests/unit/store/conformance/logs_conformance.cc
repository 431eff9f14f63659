// Rank output: idempotent appends with watermarks, cursor reads, tails, deletes.
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace logs_conformance {

v1::LogLine Line(const std::string& run, int resumption, int rank, v1::LogStream stream,
                 int64_t seq, int64_t micros, const std::string& text, int node_rank = 0) {
  v1::LogLine l;
  l.set_run_id(run);
  l.set_resumption_index(resumption);
  l.set_rank(rank);
  l.set_node_rank(node_rank);
  l.set_node_name("node-" + std::to_string(node_rank));
  l.set_stream(stream);
  l.set_sequence(seq);
  *l.mutable_time() = ToProtoTime(T(0) + absl::Microseconds(micros));
  l.set_text(text);
  return l;
}
constexpr auto kOut = v1::LOG_STREAM_STDOUT;
constexpr auto kErr = v1::LOG_STREAM_STDERR;

std::vector<std::string> Texts(const std::vector<v1::LogLine>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines) out.push_back(l.text());
  return out;
}

CONFORMANCE_CASE("logs: a batch is stored once; watermarks count contiguous lines") {
  Stores s = FreshStores();
  auto first =
      s.logs->AppendLogs({Line("r1", 0, 0, kOut, 0, 10, "a"), Line("r1", 0, 0, kOut, 1, 20, "b"),
                          Line("r1", 0, 1, kErr, 0, 15, std::string("\0\xff", 2), 1)});
  REQUIRE(first.ok());
  CHECK(first->inserted == 3);
  REQUIRE(first->watermarks.size() == 2);
  CHECK(first->watermarks[0].rank == 0);
  CHECK(first->watermarks[0].stream == kOut);
  CHECK(first->watermarks[0].durable_sequence == 1);
  CHECK(first->watermarks[1].rank == 1);
  CHECK(first->watermarks[1].durable_sequence == 0);
  CHECK(first->watermarks[1].node_name == "node-1");

  // Resent: nothing new, same watermarks.
  auto again = s.logs->AppendLogs({Line("r1", 0, 0, kOut, 1, 20, "b")});
  REQUIRE(again.ok());
  CHECK(again->inserted == 0);
  REQUIRE(again->watermarks.size() == 1);
  CHECK(again->watermarks[0].durable_sequence == 1);

  // A gap holds the watermark until it is filled.
  auto gap = s.logs->AppendLogs({Line("r1", 0, 0, kOut, 3, 40, "d")});
  REQUIRE(gap.ok());
  CHECK(gap->watermarks[0].durable_sequence == 1);
  CHECK(gap->watermarks[0].max_sequence == 3);
  auto filled = s.logs->AppendLogs({Line("r1", 0, 0, kOut, 2, 30, "c")});
  REQUIRE(filled.ok());
  CHECK(filled->watermarks[0].durable_sequence == 3);

  auto all = s.logs->ReadLogs({.run_id = "r1", .resumption_index = 0});
  REQUIRE(all.ok());
  // Ordered by time; bytes kept as they are.
  CHECK(Texts(*all) == std::vector<std::string>{"a", std::string("\0\xff", 2), "b", "c", "d"});
  CHECK((*all)[0].run_id() == "r1");
  CHECK((*all)[0].node_name() == "node-0");
  CHECK(absl::ToUnixMicros(FromProtoTime((*all)[1].time())) ==
        absl::ToUnixMicros(T(0) + absl::Microseconds(15)));
  CHECK((*all)[1].stream() == kErr);
  CHECK((*all)[1].rank() == 1);
  CHECK((*all)[1].node_rank() == 1);
}

CONFORMANCE_CASE("logs: one batch in order then repeated then past a gap then out of order") {
  Stores s = FreshStores();
  const auto line = [](int64_t seq) {
    return Line("r1", 0, 0, kOut, seq, 10 * (seq + 1), absl::StrCat("l", seq));
  };
  // 0 1 2 in order, 1 again, then 5 6 past a gap, 2 again, then 4 (out of order), 6 again.
  auto first = s.logs->AppendLogs(
      {line(0), line(1), line(2), line(1), line(5), line(6), line(2), line(4), line(6)});
  REQUIRE(first.ok());
  CHECK(first->inserted == 6);
  REQUIRE(first->watermarks.size() == 1);
  CHECK(first->watermarks[0].durable_sequence == 2);
  CHECK(first->watermarks[0].max_sequence == 6);
  // A batch that fills the gap and goes on in order past what is stored beyond it.
  auto second = s.logs->AppendLogs({line(3), line(4), line(5), line(6), line(7), line(8)});
  REQUIRE(second.ok());
  CHECK(second->inserted == 3);
  CHECK(second->watermarks[0].durable_sequence == 8);
  CHECK(second->watermarks[0].max_sequence == 8);
  // A marker of dropped lines that starts inside what is stored extends the stretch in order.
  v1::LogLine marker = line(11);
  marker.set_dropped_lines(4);  // stands for 8..11
  auto third = s.logs->AppendLogs({marker, line(12)});
  REQUIRE(third.ok());
  CHECK(third->inserted == 2);
  CHECK(third->watermarks[0].durable_sequence == 12);

  auto all = s.logs->ReadLogs({.run_id = "r1", .resumption_index = 0});
  REQUIRE(all.ok());
  CHECK(Texts(*all) == std::vector<std::string>{"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7",
                                                "l8", "l11", "l12"});
}

CONFORMANCE_CASE("logs: reads filter by rank and node rank, start at cursors, limit per stream") {
  Stores s = FreshStores();
  std::vector<v1::LogLine> batch;
  for (int rank = 0; rank < 4; ++rank) {
    for (int seq = 0; seq < 5; ++seq) {
      batch.push_back(Line("r1", 1, rank, seq % 2 ? kErr : kOut, 0, seq * 100 + rank,
                           absl::StrCat(rank, ":", seq), rank / 2));
    }
  }
  // Sequences per (rank, stream): stdout gets 0,1,2 (seq 0,2,4), stderr 0,1 (seq 1,3).
  for (auto& l : batch) {
    const int seq = std::stoi(l.text().substr(l.text().find(':') + 1));
    l.set_sequence(seq / 2);
  }
  REQUIRE(s.logs->AppendLogs(batch).ok());
  REQUIRE(s.logs->AppendLogs({Line("r1", 0, 0, kOut, 0, 1, "old")}).ok());
  REQUIRE(s.logs->AppendLogs({Line("r2", 1, 0, kOut, 0, 1, "other")}).ok());

  auto all = s.logs->ReadLogs({.run_id = "r1", .resumption_index = 1});
  REQUIRE(all.ok());
  CHECK(all->size() == 20);
  CHECK((*all)[0].text() == "0:0");
  CHECK((*all)[3].text() == "3:0");
  CHECK((*all)[4].text() == "0:1");

  auto rank2 = s.logs->ReadLogs({.run_id = "r1", .resumption_index = 1, .rank = 2});
  REQUIRE(rank2.ok());
  CHECK(Texts(*rank2) == std::vector<std::string>{"2:0", "2:1", "2:2", "2:3", "2:4"});

  auto node1 = s.logs->ReadLogs({.run_id = "r1", .resumption_index = 1, .node_rank = 1});
  REQUIRE(node1.ok());
  CHECK(node1->size() == 10);
  for (const auto& l : *node1) CHECK(l.rank() >= 2);

  LogQuery q{.run_id = "r1", .resumption_index = 1, .rank = 0};
  q.from_sequence[{0, kOut}] = 1;
  q.from_sequence[{0, kErr}] = 2;
  auto after = s.logs->ReadLogs(q);
  REQUIRE(after.ok());
  CHECK(Texts(*after) == std::vector<std::string>{"0:2", "0:4"});

  auto limited = s.logs->ReadLogs({.run_id = "r1", .resumption_index = 1, .limit_per_stream = 1});
  REQUIRE(limited.ok());
  CHECK(limited->size() == 8);  // 4 ranks x 2 streams, one line each
  for (const auto& l : *limited) CHECK(l.sequence() == 0);
}

CONFORMANCE_CASE("logs: tail is the last lines in time order; streams are listed per attempt") {
  Stores s = FreshStores();
  std::vector<v1::LogLine> batch;
  for (int seq = 0; seq < 10; ++seq) {
    batch.push_back(Line("r1", 0, seq % 2, kOut, seq / 2, seq, absl::StrCat("l", seq), seq % 2));
  }
  REQUIRE(s.logs->AppendLogs(batch).ok());
  REQUIRE(s.logs->AppendLogs({Line("r1", 1, 0, kErr, 0, 100, "next")}).ok());

  auto tail = s.logs->TailLogs({.run_id = "r1", .resumption_index = 0}, 3);
  REQUIRE(tail.ok());
  CHECK(Texts(*tail) == std::vector<std::string>{"l7", "l8", "l9"});
  auto tail_rank0 = s.logs->TailLogs({.run_id = "r1", .resumption_index = 0, .rank = 0}, 2);
  REQUIRE(tail_rank0.ok());
  CHECK(Texts(*tail_rank0) == std::vector<std::string>{"l6", "l8"});
  auto tail_all = s.logs->TailLogs({.run_id = "r1", .resumption_index = 0, .node_rank = 1}, 100);
  REQUIRE(tail_all.ok());
  CHECK(tail_all->size() == 5);

  auto streams = s.logs->ListLogStreams("r1", std::nullopt);
  REQUIRE(streams.ok());
  REQUIRE(streams->size() == 3);
  CHECK((*streams)[0].resumption_index == 0);
  CHECK((*streams)[0].rank == 0);
  CHECK((*streams)[0].durable_sequence == 4);
  CHECK((*streams)[1].rank == 1);
  CHECK((*streams)[1].node_rank == 1);
  CHECK((*streams)[2].resumption_index == 1);
  CHECK((*streams)[2].stream == kErr);
  auto only1 = s.logs->ListLogStreams("r1", 1);
  REQUIRE(only1.ok());
  CHECK(only1->size() == 1);
  CHECK(s.logs->ListLogStreams("nope", std::nullopt)->empty());
}

CONFORMANCE_CASE("logs: reads page through many batches and filled gaps in sequence order") {
  Stores s = FreshStores();
  // Batches of ten lines (sequence = time = text), two gaps filled later, one resent across a
  // gap's edge.
  auto batch = [](int from, int to) {
    std::vector<v1::LogLine> lines;
    for (int seq = from; seq <= to; ++seq) {
      lines.push_back(Line("r1", 0, 0, kOut, seq, seq, absl::StrCat(seq)));
    }
    return lines;
  };
  for (auto [from, to] : {std::pair{0, 9}, {20, 29}, {40, 49}, {10, 19}, {25, 34}, {35, 39}}) {
    REQUIRE(s.logs->AppendLogs(batch(from, to)).ok());
  }
  auto texts = [](int from, int to) {
    std::vector<std::string> out;
    for (int seq = from; seq <= to; ++seq) out.push_back(absl::StrCat(seq));
    return out;
  };
  const auto read = [&](int64_t from, int limit) {
    LogQuery q{.run_id = "r1", .limit_per_stream = limit};
    q.from_sequence[{0, kOut}] = from;
    auto lines = s.logs->ReadLogs(q);
    REQUIRE(lines.ok());
    return Texts(*lines);
  };
  CHECK(read(0, 7) == texts(0, 6));
  CHECK(read(5, 10) == texts(5, 14));
  CHECK(read(18, 5) == texts(18, 22));
  CHECK(read(33, 0) == texts(33, 49));
  CHECK(read(50, 10).empty());
  // Paging a page at a time sees every line once.
  std::vector<std::string> paged;
  for (int64_t next = 0;;) {
    auto page = read(next, 7);
    if (page.empty()) break;
    paged.insert(paged.end(), page.begin(), page.end());
    next += static_cast<int64_t>(page.size());
  }
  CHECK(paged == texts(0, 49));
  auto tail = s.logs->TailLogs({.run_id = "r1"}, 12);
  REQUIRE(tail.ok());
  CHECK(Texts(*tail) == texts(38, 49));
  auto streams = s.logs->ListLogStreams("r1", 0);
  REQUIRE(streams.ok());
  REQUIRE(streams->size() == 1);
  CHECK((*streams)[0].durable_sequence == 49);
  CHECK(s.logs->RunLogBytes("r1").value() == 10 + 40 * 2);

  // Where a read from a time starts: at or before the first line printed then (never after).
  const absl::Time at25 = T(0) + absl::Microseconds(25);
  auto since = s.logs->SequencesSince("r1", 0, at25);
  REQUIRE(since.ok());
  REQUIRE(since->size() == 1);
  const int64_t start = since->at({0, kOut});
  CHECK(start <= 25);
  CHECK(start >= 0);
  CHECK(s.logs->SequencesSince("r1", 0, T(0))->at({0, kOut}) == 0);
  CHECK(s.logs->SequencesSince("r1", 0, T(1))->at({0, kOut}) == 50);  // nothing since
  CHECK(s.logs->SequencesSince("r1", 1, T(0))->empty());
}

CONFORMANCE_CASE("logs: expiring a run's lines remembers when; deleting them forgets it") {
  Stores s = FreshStores();
  REQUIRE(s.logs->AppendLogs({Line("r1", 0, 0, kOut, 0, 1, "a"), Line("r2", 0, 0, kOut, 0, 1, "b")})
              .ok());
  CHECK(s.logs->LogsExpiredAt("r1")->has_value() == false);
  REQUIRE(s.logs->ExpireRunLogs("r1", T(100)).ok());
  CHECK(s.logs->ReadLogs({.run_id = "r1"})->empty());
  CHECK(s.logs->ReadLogs({.run_id = "r2"})->size() == 1);
  auto at = s.logs->LogsExpiredAt("r1");
  REQUIRE(at.ok());
  REQUIRE(at->has_value());
  CHECK(**at == T(100));
  // Expiring again keeps the first time.
  REQUIRE(s.logs->ExpireRunLogs("r1", T(200)).ok());
  CHECK(**s.logs->LogsExpiredAt("r1") == T(100));
  // The run deleted: nothing of it is left, the mark included.
  REQUIRE(s.logs->DeleteRunLogs("r1").ok());
  CHECK(s.logs->LogsExpiredAt("r1")->has_value() == false);
}

CONFORMANCE_CASE("logs: deleting a run's lines leaves other runs; deleting twice is fine") {
  Stores s = FreshStores();
  REQUIRE(s.logs->AppendLogs({Line("r1", 0, 0, kOut, 0, 1, "a"), Line("r2", 0, 0, kOut, 0, 1, "b")})
              .ok());
  REQUIRE(s.logs->DeleteRunLogs("r1").ok());
  REQUIRE(s.logs->DeleteRunLogs("r1").ok());
  CHECK(s.logs->ReadLogs({.run_id = "r1"})->empty());
  CHECK(s.logs->ListLogStreams("r1", std::nullopt)->empty());
  CHECK(s.logs->ReadLogs({.run_id = "r2"})->size() == 1);
  // Stored again from 0 after a delete.
  auto again = s.logs->AppendLogs({Line("r1", 0, 0, kOut, 0, 1, "a")});
  REQUIRE(again.ok());
  CHECK(again->inserted == 1);
  CHECK(again->watermarks[0].durable_sequence == 0);
}

CONFORMANCE_CASE("logs: concurrent writers of the same streams store each line once") {
  Stores s = FreshStores();
  auto batch = [](int b) {
    std::vector<v1::LogLine> lines;
    for (int k = 0; k < 50; ++k) {  // ranks 0 and 1, 25 lines each
      const int64_t seq = b * 25 + k / 2;
      lines.push_back(Line("r1", 0, k % 2, kOut, seq, seq, absl::StrCat(k % 2, ":", seq)));
    }
    return lines;
  };
  // Four writers send the same ten batches, each starting elsewhere (as resends would).
  std::vector<absl::Status> errors(4);
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 10; ++i) {
        auto r = s.logs->AppendLogs(batch((i + 3 * w) % 10));
        if (!r.ok()) errors[w] = r.status();
      }
    });
  }
  for (auto& t : writers) t.join();
  for (const auto& e : errors) CHECK(e.ok());
  auto all = s.logs->ReadLogs({.run_id = "r1"});
  REQUIRE(all.ok());
  CHECK(all->size() == 500);
  // The last batch stored sees every earlier one: watermarks end complete.
  auto again = s.logs->AppendLogs(batch(9));
  REQUIRE(again.ok());
  CHECK(again->inserted == 0);
  REQUIRE(again->watermarks.size() == 2);
  for (const auto& w : again->watermarks) CHECK(w.durable_sequence == 249);
}

}  // namespace logs_conformance
}  // namespace tessera::store::conformance
