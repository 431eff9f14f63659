// StreamLogs' batches: full batches go at once, the rest on a flush, none over the size bound.
#include "services/logs/line_batcher.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tessera::logs {
namespace line_batcher_test {

struct RecordingWriter {
  std::vector<v1::LogLines> written;
  bool accept = true;
  bool Write(const v1::LogLines& batch) {
    written.push_back(batch);
    return accept;
  }
};

v1::LogLine Line(int i, size_t bytes = 10) {
  v1::LogLine l;
  l.set_sequence(i);
  l.set_text(std::string(bytes, 'x'));
  return l;
}

TEST_CASE("lines go in batches of at most 2,000, the rest on a flush, in order") {
  RecordingWriter w;
  LineBatcher<RecordingWriter> batch(&w);
  for (int i = 0; i < 4500; ++i) REQUIRE(batch.Add(Line(i)));
  REQUIRE(w.written.size() == 2);
  CHECK(w.written[0].lines_size() == kMaxBatchLines);
  CHECK(w.written[1].lines(0).sequence() == kMaxBatchLines);
  REQUIRE(batch.Flush());
  REQUIRE(w.written.size() == 3);
  CHECK(w.written[2].lines_size() == 500);
  CHECK(w.written[2].lines(499).sequence() == 4499);
  // Nothing gathered: a flush writes nothing.
  REQUIRE(batch.Flush());
  CHECK(w.written.size() == 3);
}

TEST_CASE("a batch stays under 1 MiB: large lines go a few to a message") {
  RecordingWriter w;
  LineBatcher<RecordingWriter> batch(&w);
  for (int i = 0; i < 5; ++i) REQUIRE(batch.Add(Line(i, 300 << 10)));
  REQUIRE(batch.Flush());
  int lines = 0;
  for (const auto& b : w.written) {
    CHECK(b.ByteSizeLong() <= kMaxBatchBytes);
    lines += b.lines_size();
  }
  CHECK(lines == 5);
  CHECK(w.written.size() == 2);  // 3 lines, then 2
}

TEST_CASE("a reader gone is reported by the write that found it") {
  RecordingWriter w;
  w.accept = false;
  LineBatcher<RecordingWriter> batch(&w);
  CHECK(batch.Add(Line(0)));  // only gathered
  CHECK_FALSE(batch.Flush());
}

}  // namespace line_batcher_test
}  // namespace tessera::logs
