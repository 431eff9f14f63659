// Lines packed per stream (proto/policy/packed_log_lines.h) and StreamLogs' packed batches: what
// a follower merges back is every line it was sent, with its fields, in the order sent.
#include "proto/policy/packed_log_lines.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/logs/line_batcher.h"

namespace tessera::logs {
namespace packed_log_lines_test {

struct RecordingWriter {
  std::vector<v1::LogLines> written;
  bool Write(const v1::LogLines& batch) {
    written.push_back(batch);
    return true;
  }
};

v1::LogLine Line(int rank, v1::LogStream stream, int64_t seq, int64_t micros,
                 const std::string& node = "node-a") {
  v1::LogLine l;
  l.set_run_id("run-1");
  l.set_resumption_index(2);
  l.set_rank(rank);
  l.set_node_rank(rank / 8);
  l.set_stream(stream);
  l.set_node_name(node);
  l.set_sequence(seq);
  *l.mutable_time() = LogTimeFromMicros(micros);
  l.set_text(absl::StrCat("rank ", rank, " line ", seq));
  return l;
}

std::vector<v1::LogLine> Merged(const RecordingWriter& w) {
  std::vector<v1::LogLine> out;
  for (const auto& batch : w.written) {
    auto lines = LinesInDisplayOrder(batch);
    REQUIRE(lines.ok());
    out.insert(out.end(), lines->begin(), lines->end());
  }
  return out;
}

void CheckSame(const std::vector<v1::LogLine>& got, const std::vector<v1::LogLine>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("line " << i);
    CHECK(got[i].SerializeAsString() == want[i].SerializeAsString());
  }
}

TEST_CASE("a line's time in microseconds goes back and forth, before the epoch too") {
  for (int64_t micros : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{-1'000'000},
                         int64_t{-1'500'001}, int64_t{1'700'000'000'123'456}}) {
    INFO(micros);
    const auto t = LogTimeFromMicros(micros);
    CHECK(t.nanos() >= 0);
    CHECK(t.nanos() < 1'000'000'000);
    CHECK(LogTimeMicros(t) == micros);
  }
}

TEST_CASE("packed: two ranks' lines interleaved in time come back in the order they were added") {
  RecordingWriter w;
  PackedLineBatcher<RecordingWriter> batch(&w);
  std::vector<v1::LogLine> sent;
  for (int i = 0; i < 300; ++i) {
    sent.push_back(Line(i % 3, i % 2 ? v1::LOG_STREAM_STDERR : v1::LOG_STREAM_STDOUT, i / 6,
                        1'000'000 + i * 10));
  }
  for (const auto& l : sent) REQUIRE(batch.Add(l));
  REQUIRE(batch.Flush());
  REQUIRE(w.written.size() == 1);
  CHECK(w.written[0].lines_size() == 0);
  CHECK(w.written[0].packed_size() == 6);  // one group per (rank, stream)
  CheckSame(Merged(w), sent);
}

TEST_CASE("packed: a line earlier than its stream's last sorts after it, not before") {
  // As a page sorts: within a stream, the order added; across streams, by the latest time so
  // far (a stream whose clock stepped back is not split).
  RecordingWriter w;
  PackedLineBatcher<RecordingWriter> batch(&w);
  const std::vector<v1::LogLine> sent = {
      Line(0, v1::LOG_STREAM_STDOUT, 0, 100), Line(0, v1::LOG_STREAM_STDOUT, 1, 300),
      Line(0, v1::LOG_STREAM_STDOUT, 2, 50),  // at 300
      Line(1, v1::LOG_STREAM_STDOUT, 0, 300), Line(1, v1::LOG_STREAM_STDOUT, 1, 400)};
  for (const auto& l : sent) REQUIRE(batch.Add(l));
  REQUIRE(batch.Flush());
  CheckSame(Merged(w), sent);
}

TEST_CASE("packed: a stream's lines from another node start a group of their own") {
  RecordingWriter w;
  PackedLineBatcher<RecordingWriter> batch(&w);
  const std::vector<v1::LogLine> sent = {Line(0, v1::LOG_STREAM_STDOUT, 0, 100, "node-a"),
                                         Line(0, v1::LOG_STREAM_STDOUT, 1, 200, "node-b")};
  for (const auto& l : sent) REQUIRE(batch.Add(l));
  REQUIRE(batch.Flush());
  REQUIRE(w.written[0].packed_size() == 2);
  CheckSame(Merged(w), sent);
}

TEST_CASE("packed: a message holds at most 16,384 lines and stays under 1 MiB") {
  RecordingWriter w;
  PackedLineBatcher<RecordingWriter> batch(&w);
  std::vector<v1::LogLine> sent;
  for (int i = 0; i < 20000; ++i) sent.push_back(Line(i % 4, v1::LOG_STREAM_STDOUT, i / 4, i));
  for (int i = 0; i < 4; ++i) {
    v1::LogLine big = Line(0, v1::LOG_STREAM_STDERR, i, 30000 + i);
    big.set_text(std::string(400 << 10, 'x'));
    sent.push_back(big);
  }
  for (const auto& l : sent) REQUIRE(batch.Add(l));
  REQUIRE(batch.Flush());
  for (const auto& m : w.written) CHECK(m.ByteSizeLong() <= kMaxBatchBytes);
  CHECK(w.written[0].packed_size() == 4);
  int64_t first = 0;
  REQUIRE(ForEachPackedLine(w.written[0].packed(0), [&](const ChunkLine&) { ++first; }).ok());
  CHECK(first == kMaxPackedBatchLines / 4);
  CheckSame(Merged(w), sent);
}

TEST_CASE("packed bytes that are not whole lines are DataLoss naming where") {
  v1::LogLines batch;
  v1::PackedLogLines* g = batch.add_packed();
  CopyStreamFields(Line(0, v1::LOG_STREAM_STDOUT, 0, 0), *g);
  PackLine(Line(0, v1::LOG_STREAM_STDOUT, 0, 0), *g);
  g->mutable_lines()->append("short");
  auto lines = LinesInDisplayOrder(batch);
  REQUIRE(absl::IsDataLoss(lines.status()));
  CHECK(std::string(lines.status().message()).find("offset") != std::string::npos);
  // A length past the end.
  g->mutable_lines()->resize(kChunkLineHeaderBytes - 1);
  g->mutable_lines()->push_back('\x7f');
  CHECK(absl::IsDataLoss(LinesInDisplayOrder(batch).status()));
}

}  // namespace packed_log_lines_test
}  // namespace tessera::logs
