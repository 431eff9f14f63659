#include "worker/logship/spool_reader.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace tessera::worker {
namespace spool_reader_test {
namespace fs = std::filesystem;

struct Spool {
  testing::TempDir tmp{"spool_test"};
  const std::string dir = tmp.path;
  const std::string path = dir + "/rank-0.stdout";
  void Append(const std::string& text) { std::ofstream(path, std::ios::app) << text; }
};

std::vector<SpoolLine> ReadAll(SpoolReader& r, bool final = false) {
  std::vector<SpoolLine> out;
  REQUIRE(r.Read(1000, 1 << 20, final, out).ok());
  return out;
}

TEST_CASE("a missing spool reads as empty, complete lines come numbered, partial ones wait") {
  Spool s;
  SpoolReader r(s.path, {});
  CHECK(ReadAll(r).empty());
  s.Append("a\nbb\ncc");
  auto lines = ReadAll(r);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].text == "a");
  CHECK(lines[0].end.offset == 2);
  CHECK(lines[0].end.sequence == 1);
  CHECK(lines[1].text == "bb");
  CHECK(lines[1].end.offset == 5);
  CHECK(lines[1].end.sequence == 2);
  s.Append("c\n");
  lines = ReadAll(r);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].text == "ccc");
  CHECK(lines[0].end.sequence == 3);
}

TEST_CASE("the writer's last line without a newline is shipped once it has exited") {
  Spool s;
  s.Append("x\ntail");
  SpoolReader r(s.path, {});
  CHECK(ReadAll(r).size() == 1);
  CHECK_FALSE(r.AtEnd(true));
  auto last = ReadAll(r, /*final=*/true);
  REQUIRE(last.size() == 1);
  CHECK(last[0].text == "tail");
  CHECK(r.AtEnd(true));
  CHECK(ReadAll(r, true).empty());
}

TEST_CASE("rewinding numbers every line exactly as before") {
  Spool s;
  s.Append("l0\nl1\nl2\nl3\n");
  SpoolReader r(s.path, {});
  std::vector<SpoolLine> first;
  REQUIRE(r.Read(2, 1 << 20, false, first).ok());
  REQUIRE(first.size() == 2);
  const SpoolPosition after_two = first.back().end;
  auto rest = ReadAll(r);
  REQUIRE(rest.size() == 2);
  r.Rewind(after_two);
  auto again = ReadAll(r);
  REQUIRE(again.size() == 2);
  CHECK(again[0].text == "l2");
  CHECK(again[0].end.sequence == rest[0].end.sequence);
  // A reader started at a saved position does the same.
  SpoolReader resumed(s.path, after_two);
  auto third = ReadAll(resumed);
  REQUIRE(third.size() == 2);
  CHECK(third[1].text == "l3");
  CHECK(third[1].end.sequence == 4);
}

TEST_CASE("an over-long line is cut into pieces") {
  Spool s;
  s.Append(std::string(SpoolReader::kMaxLine + 10, 'z') + "\n");
  SpoolReader r(s.path, {});
  auto lines = ReadAll(r);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].text.size() == SpoolReader::kMaxLine);
  CHECK(lines[1].text == std::string(10, 'z'));
}

TEST_CASE("bytes that are not text pass through unchanged") {
  Spool s;
  s.Append(std::string("\x00\xff\x80 ok\r", 6) + "\n");
  SpoolReader r(s.path, {});
  auto lines = ReadAll(r);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].text == std::string("\x00\xff\x80 ok\r", 6));
}

TEST_CASE("the acknowledged position survives in <spool>.acked") {
  Spool s;
  CHECK(LoadAckState(s.path).acked.offset == 0);
  REQUIRE(SaveAckState(s.path, {{120, 7}, false}).ok());
  AckState st = LoadAckState(s.path);
  CHECK(st.acked.offset == 120);
  CHECK(st.acked.sequence == 7);
  CHECK_FALSE(st.done);
  REQUIRE(SaveAckState(s.path, {{130, 8}, true}).ok());
  CHECK(LoadAckState(s.path).done);
  std::ofstream(s.path + ".acked") << "garbage";
  CHECK(LoadAckState(s.path).acked.offset == 0);
}

}  // namespace spool_reader_test
}  // namespace tessera::worker
