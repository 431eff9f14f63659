#include "base/log_line_codec.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tessera {
namespace log_line_codec_test {

std::vector<ChunkLine> Decode(const std::string& chunk, absl::Status* status) {
  std::vector<ChunkLine> out;
  *status = ForEachChunkLine(chunk, [&](const ChunkLine& l) { out.push_back(l); });
  return out;
}

TEST_CASE("a chunk gives back its lines, bytes and numbers as written") {
  std::string chunk;
  const std::string binary("\0\xff\n", 3);
  AppendChunkLine({.sequence = 7, .micros = -5, .dropped = 0, .text = "hello"}, chunk);
  AppendChunkLine(
      {.sequence = 1LL << 40, .micros = 1'700'000'000'000'000, .dropped = 3, .text = binary},
      chunk);
  AppendChunkLine({.sequence = 9, .micros = 0, .dropped = 0, .text = ""}, chunk);
  CHECK(chunk.size() == 3 * kChunkLineHeaderBytes + 5 + 3);
  absl::Status st;
  auto lines = Decode(chunk, &st);
  REQUIRE(st.ok());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].sequence == 7);
  CHECK(lines[0].micros == -5);
  CHECK(lines[0].text == "hello");
  CHECK(lines[1].sequence == (1LL << 40));
  CHECK(lines[1].micros == 1'700'000'000'000'000);
  CHECK(lines[1].dropped == 3);
  CHECK(lines[1].text == binary);
  CHECK(lines[2].text.empty());
}

TEST_CASE("the layout is big-endian fixed widths, as SQL's int8send and int4send write it") {
  std::string chunk;
  AppendChunkLine({.sequence = 0x0102, .micros = 3, .dropped = 0, .text = "x"}, chunk);
  const std::string expected = std::string("\0\0\0\0\0\0\x01\x02", 8) +
                               std::string("\0\0\0\0\0\0\0\x03", 8) + std::string(8, '\0') +
                               std::string("\0\0\0\x01", 4) + "x";
  CHECK(chunk == expected);
}

TEST_CASE("a chunk cut short or with a length past its end is data loss, not a crash") {
  std::string chunk;
  AppendChunkLine({.sequence = 1, .micros = 1, .dropped = 0, .text = "first"}, chunk);
  AppendChunkLine({.sequence = 2, .micros = 2, .dropped = 0, .text = "second"}, chunk);
  absl::Status st;
  SECTION("inside a header") {
    auto lines = Decode(chunk.substr(0, kChunkLineHeaderBytes + 5 + 10), &st);
    CHECK(absl::IsDataLoss(st));
    CHECK(lines.size() == 1);
  }
  SECTION("inside a text") {
    auto lines = Decode(chunk.substr(0, chunk.size() - 1), &st);
    CHECK(absl::IsDataLoss(st));
    CHECK(lines.size() == 1);
  }
  SECTION("a length of 4 GiB") {
    std::string bad = chunk.substr(0, kChunkLineHeaderBytes);
    bad.replace(24, 4, std::string(4, '\xff'));
    Decode(bad, &st);
    CHECK(absl::IsDataLoss(st));
  }
  SECTION("empty: no lines") {
    CHECK(Decode("", &st).empty());
    CHECK(st.ok());
  }
}

}  // namespace log_line_codec_test
}  // namespace tessera
