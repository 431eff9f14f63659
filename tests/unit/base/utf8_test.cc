// UTF-8 checks and the lossy conversion log lines go through before they become JSON.
#include "base/utf8.h"

#include <catch2/catch.hpp>

namespace tessera {
namespace utf8_test {

TEST_CASE("ToValidUtf8 keeps valid text and replaces each bad byte by U+FFFD", "[utf8]") {
  const std::string kBad = "\xEF\xBF\xBD";
  CHECK(ToValidUtf8("") == "");
  CHECK(ToValidUtf8("plain \t text") == "plain \t text");
  CHECK(ToValidUtf8("\xC3\xA9\xE2\x9C\x93\xF0\x9F\x98\x80") ==
        "\xC3\xA9\xE2\x9C\x93\xF0\x9F\x98\x80");
  CHECK(ToValidUtf8(std::string("a\xFF") + "b") == "a" + kBad + "b");
  CHECK(ToValidUtf8("\xC3") == kBad);                                      // truncated at the end
  CHECK(ToValidUtf8(std::string("\xE2\x9C") + "x") == kBad + kBad + "x");  // truncated early
  CHECK(ToValidUtf8("\xC0\xAF") == kBad + kBad);                           // overlong
  CHECK(ToValidUtf8("\xED\xA0\x80") == kBad + kBad + kBad);                // surrogate
  CHECK(ToValidUtf8("\xF4\x90\x80\x80") == kBad + kBad + kBad + kBad);     // past U+10FFFF
  CHECK(IsValidUtf8(ToValidUtf8("\x80\xFE mixed \xC3\xA9 \xF0\x9F")));
}

TEST_CASE("IsValidUtf8 and Utf8SequenceLength agree", "[utf8]") {
  CHECK(IsValidUtf8("\xC3\xA9"));
  CHECK_FALSE(IsValidUtf8("\xC3"));
  CHECK(Utf8SequenceLength("a", 0) == 1);
  CHECK(Utf8SequenceLength("\xC3\xA9", 0) == 2);
  CHECK(Utf8SequenceLength("\xE2\x9C\x93", 0) == 3);
  CHECK(Utf8SequenceLength("\xF0\x9F\x98\x80", 0) == 4);
  CHECK(Utf8SequenceLength("\xF0\x9F\x98", 0) == 0);
}

}  // namespace utf8_test
}  // namespace tessera
