// Lines packed per stream (LogBatchToStore::packed): stored, read back and handed to followers
// exactly as the same lines sent one message each would be, in the same batch as plain ones.
#include <algorithm>

#include "proto/policy/packed_log_lines.h"
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace logs_packed_conformance {

constexpr auto kOut = v1::LOG_STREAM_STDOUT;
constexpr auto kErr = v1::LOG_STREAM_STDERR;

v1::LogLine PlainLine(int rank, v1::LogStream stream, int64_t seq, const std::string& text,
                      int64_t dropped = 0) {
  v1::LogLine l;
  l.set_run_id("rp");
  l.set_resumption_index(1);
  l.set_rank(rank);
  l.set_node_rank(rank / 2);
  l.set_node_name("node-" + std::to_string(rank / 2));
  l.set_stream(stream);
  l.set_sequence(seq);
  *l.mutable_time() = ToProtoTime(T(0) + absl::Microseconds(1000 * seq + rank));
  l.set_text(text);
  l.set_dropped_lines(dropped);
  return l;
}

// The lines packed as a worker packs them (one group, the first line's stream).
v1::PackedLogLines Pack(const std::vector<v1::LogLine>& lines) {
  v1::PackedLogLines g;
  CopyStreamFields(lines.front(), g);
  for (const auto& l : lines) PackLine(l, g);
  return g;
}

std::vector<std::string> Described(const std::vector<v1::LogLine>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines) out.push_back(l.ShortDebugString());
  return out;
}

LogQuery Attempt() {
  LogQuery q;
  q.run_id = "rp";
  q.resumption_index = 1;
  return q;
}

CONFORMANCE_CASE("logs packed: stored beside plain lines, read back as the same lines") {
  Stores s = FreshStores();
  const std::string binary("\0\xff\n", 3);
  const std::vector<v1::LogLine> all = {PlainLine(0, kOut, 0, "plain 0"),
                                        PlainLine(0, kOut, 1, "plain 1"),
                                        PlainLine(2, kOut, 0, "packed r2 0"),
                                        PlainLine(2, kOut, 1, binary),
                                        PlainLine(2, kOut, 2, ""),
                                        PlainLine(0, kOut, 2, "packed r0 2"),
                                        PlainLine(2, kErr, 0, "err")};
  LogBatchToStore batch;
  batch.lines = {all[0], all[1]};
  batch.packed = {Pack({all[2], all[3], all[4]}), Pack({all[5]}), Pack({all[6]})};
  auto stored = s.logs->AppendLogBatch(std::move(batch));
  REQUIRE(stored.ok());
  CHECK(stored->inserted == 7);
  // In order of first appearance: the plain lines' stream, then the packed groups' others.
  REQUIRE(stored->watermarks.size() == 3);
  CHECK(stored->watermarks[0].rank == 0);
  CHECK(stored->watermarks[0].durable_sequence == 2);
  CHECK(stored->watermarks[1].rank == 2);
  CHECK(stored->watermarks[1].stream == kOut);
  CHECK(stored->watermarks[1].durable_sequence == 2);
  CHECK(stored->watermarks[1].node_name == "node-1");
  CHECK(stored->watermarks[2].stream == kErr);

  auto read = s.logs->ReadLogs(Attempt());
  REQUIRE(read.ok());
  std::vector<v1::LogLine> want = all;
  std::sort(want.begin(), want.end(), LogLineBefore);
  CHECK(Described(*read) == Described(want));

  // Resent packed: nothing new.
  auto again = s.logs->AppendLogBatch({.packed = {Pack({all[2], all[3], all[4]})}});
  REQUIRE(again.ok());
  CHECK(again->inserted == 0);
  CHECK(again->watermarks[0].durable_sequence == 2);
}

CONFORMANCE_CASE("logs packed: a group past a gap waits for it; a marker stands for its lines") {
  Stores s = FreshStores();
  REQUIRE(s.logs->AppendLogBatch({.packed = {Pack({PlainLine(0, kOut, 0, "a")})}}).ok());
  // Lines 4 and 5 arrive before 1..3; then a marker for 1..3 (dropped over a quota) fills it.
  auto gap = s.logs->AppendLogBatch(
      {.packed = {Pack({PlainLine(0, kOut, 4, "e"), PlainLine(0, kOut, 5, "f")})}});
  REQUIRE(gap.ok());
  CHECK(gap->watermarks[0].durable_sequence == 0);
  CHECK(gap->watermarks[0].max_sequence == 5);
  auto filled = s.logs->AppendLogBatch(
      {.packed = {Pack({PlainLine(0, kOut, 3, "[3 lines dropped]", /*dropped=*/3)})}});
  REQUIRE(filled.ok());
  CHECK(filled->inserted == 1);
  CHECK(filled->watermarks[0].durable_sequence == 5);
  auto read = s.logs->ReadLogs(Attempt());
  REQUIRE(read.ok());
  std::vector<std::string> texts;
  for (const auto& l : *read) texts.push_back(l.text());
  CHECK(texts == std::vector<std::string>{"a", "[3 lines dropped]", "e", "f"});
  CHECK((*read)[1].dropped_lines() == 3);
}

CONFORMANCE_CASE("logs packed: a follower is handed packed lines as a read returns them") {
  Stores s = FreshStores();
  auto sub = s.logs->SubscribeLogs("rp", 1);
  sub->Take();
  const std::vector<v1::LogLine> lines = {PlainLine(0, kOut, 0, "x"), PlainLine(0, kOut, 1, "y")};
  REQUIRE(s.logs->AppendLogBatch({.packed = {Pack(lines)}}).ok());
  auto taken = sub->Take();
  std::vector<v1::LogLine> handed;
  for (const auto& batch : taken.batches) {
    handed.insert(handed.end(), batch->lines.begin(), batch->lines.end());
    for (const auto& group : batch->packed) REQUIRE(UnpackLines(group, handed).ok());
  }
  auto read = s.logs->ReadLogs(Attempt());
  REQUIRE(read.ok());
  CHECK(Described(handed) == Described(*read));
}

}  // namespace logs_packed_conformance
}  // namespace tessera::store::conformance
