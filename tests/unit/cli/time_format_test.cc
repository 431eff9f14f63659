// Times on the command line (RFC 3339 or ages like "2h") and durations in human output.

#include "cli/time_format.h"

#include <catch2/catch.hpp>

#include "cli/errors.h"

namespace time_format_test {

using tessera::cli::CliError;
using tessera::cli::FormatSeconds;
using tessera::cli::FormatTimestamp;
using tessera::cli::ParseTimeArg;

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

TEST_CASE("relative times count back from now", "[cli][time]") {
  CHECK(ParseTimeArg("--after", "90s", kNow) == kNow - absl::Seconds(90));
  CHECK(ParseTimeArg("--after", "30m", kNow) == kNow - absl::Minutes(30));
  CHECK(ParseTimeArg("--after", "2h", kNow) == kNow - absl::Hours(2));
  CHECK(ParseTimeArg("--after", "1d", kNow) == kNow - absl::Hours(24));
  CHECK(ParseTimeArg("--after", "1w", kNow) == kNow - absl::Hours(24 * 7));
  CHECK(ParseTimeArg("--after", "1h30m", kNow) == kNow - absl::Minutes(90));
  CHECK(ParseTimeArg("--after", "2H", kNow) == kNow - absl::Hours(2));
}

TEST_CASE("absolute times are RFC 3339 or a date", "[cli][time]") {
  CHECK(ParseTimeArg("--before", "2023-11-14T22:13:20Z", kNow) == kNow);
  CHECK(ParseTimeArg("--before", "2023-11-15T00:13:20+02:00", kNow) == kNow);
  CHECK(ParseTimeArg("--before", "2023-11-14T22:13:20.5Z", kNow) == kNow + absl::Milliseconds(500));
  CHECK(ParseTimeArg("--before", "2023-11-14", kNow) == absl::FromUnixSeconds(1'699'920'000));
}

TEST_CASE("bad times are usage errors naming the flag", "[cli][time]") {
  for (const char* text : {"", "yesterday", "2h30", "h", "5x", "2023-13-45", "-2h"}) {
    INFO(text);
    try {
      ParseTimeArg("--before", text, kNow);
      FAIL("expected an error");
    } catch (const CliError& e) {
      CHECK(e.exit_code() == 2);
      CHECK_THAT(e.what(), Catch::Contains("--before"));
    }
  }
}

TEST_CASE("durations are short and human", "[cli][time]") {
  CHECK(FormatSeconds(0) == "-");
  CHECK(FormatSeconds(0.4) == "<1s");
  CHECK(FormatSeconds(5) == "5s");
  CHECK(FormatSeconds(65) == "1m 5s");
  CHECK(FormatSeconds(120) == "2m");
  CHECK(FormatSeconds(3 * 3600 + 4 * 60 + 5) == "3h 4m");
  CHECK(FormatSeconds(2 * 86400 + 3 * 3600) == "2d 3h");
}

TEST_CASE("unset timestamps show as a dash", "[cli][time]") {
  CHECK(FormatTimestamp(google::protobuf::Timestamp()) == "-");
  google::protobuf::Timestamp set;
  set.set_seconds(1'700'000'000);
  const std::string text = FormatTimestamp(set);
  CHECK(text.size() == 19);  // YYYY-MM-DD HH:MM:SS in the local zone
  CHECK(text.substr(0, 8) == "2023-11-");
}

}  // namespace time_format_test
