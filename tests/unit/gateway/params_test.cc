// Parameter types, query strings and their error messages.
#include "services/gateway/params.h"

#include <catch2/catch.hpp>

#include "tessera/v1/runs.pb.h"

namespace tessera::gateway {
namespace params_test {

TEST_CASE("query strings split and decode in order", "[gateway][params]") {
  auto pairs = ParseQueryString("a=1&b=x%20y&b=z+w&flag&&c=%E2%9C%93&=v");
  REQUIRE(pairs.ok());
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"a", "1"}, {"b", "x y"}, {"b", "z w"}, {"flag", ""}, {"c", "\xE2\x9C\x93"}, {"", "v"}};
  CHECK(*pairs == expected);
  CHECK(ParseQueryString("").value().empty());
  CHECK_FALSE(ParseQueryString("a=%zz").ok());
  CHECK_FALSE(ParseQueryString("a=%4").ok());
  CHECK_FALSE(ParseQueryString("a=%ff").ok());  // not UTF-8
  const auto bad = ParseQueryString("user=%zz");
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("\"user\""));
}

TEST_CASE("path segments decode without turning + into a space", "[gateway][params]") {
  CHECK(DecodePathSegment("a+b%2Dc").value() == "a+b-c");
  CHECK_FALSE(DecodePathSegment("%").ok());
}

TEST_CASE("UTF-8 validation", "[gateway][params]") {
  CHECK(IsValidUtf8("plain"));
  CHECK(IsValidUtf8("\xC3\xA9\xE2\x9C\x93\xF0\x9F\x98\x80"));
  CHECK_FALSE(IsValidUtf8("\xC3"));              // truncated
  CHECK_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong
  CHECK_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  CHECK_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(IsValidUtf8("\xFF"));
}

TEST_CASE("names and ids", "[gateway][params]") {
  const ParamSpec run = PathParam("name", ParamType::kRunName, "");
  CHECK(ValidateParam(run, "train-1").ok());
  CHECK(ValidateParam(run, std::string(63, 'a')).ok());
  CHECK_FALSE(ValidateParam(run, std::string(64, 'a')).ok());
  CHECK_FALSE(ValidateParam(run, "").ok());
  CHECK_FALSE(ValidateParam(run, "Train").ok());
  CHECK_FALSE(ValidateParam(run, "a_b").ok());
  const auto st = ValidateParam(run, "A/B");
  CHECK_THAT(std::string(st.message()), Catch::Contains("path parameter \"name\""));
  CHECK_THAT(std::string(st.message()), Catch::Contains("\"A/B\""));

  const ParamSpec node = PathParam("name", ParamType::kNodeName, "");
  CHECK(ValidateParam(node, "Gpu-Node.rack_1").ok());
  CHECK_FALSE(ValidateParam(node, "a b").ok());
  const ParamSpec id = PathParam("id", ParamType::kId, "");
  CHECK(ValidateParam(id, "0b7c:11ef-9").ok());
  CHECK_FALSE(ValidateParam(id, "a/b").ok());
}

TEST_CASE("counts, ids, booleans", "[gateway][params]") {
  const ParamSpec limit = QueryParam("limit", ParamType::kCount, "");
  CHECK(ParseCount(limit, "0").value() == 0);
  CHECK(ParseCount(limit, "2147483647").value() == 2147483647);
  for (const char* bad : {"-1", "abc", "", "+1", " 1", "1.5", "2147483648", "99999999999"}) {
    INFO(bad);
    const auto r = ParseCount(limit, bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("query parameter \"limit\""));
  }
  const ParamSpec after = QueryParam("after_id", ParamType::kId64, "");
  CHECK(ParseId64(after, "9223372036854775807").value() == 9223372036854775807LL);
  CHECK_FALSE(ParseId64(after, "9223372036854775808").ok());
  CHECK_FALSE(ParseId64(after, "-3").ok());

  const ParamSpec flag = QueryParam("latest", ParamType::kBoolean, "");
  CHECK(ParseBoolean(flag, "").value());
  CHECK(ParseBoolean(flag, "TRUE").value());
  CHECK(ParseBoolean(flag, "1").value());
  CHECK_FALSE(ParseBoolean(flag, "false").value());
  CHECK_FALSE(ParseBoolean(flag, "0").value());
  CHECK_FALSE(ParseBoolean(flag, "yes").ok());
}

TEST_CASE("RFC 3339 times", "[gateway][params]") {
  const ParamSpec after = QueryParam("after", ParamType::kDateTime, "");
  auto t = ParseDateTime(after, "2024-05-01T12:00:00Z");
  REQUIRE(t.ok());
  CHECK(t->seconds() == 1714564800);
  CHECK(t->nanos() == 0);
  t = ParseDateTime(after, "2024-05-01T14:00:00.25+02:00");
  REQUIRE(t.ok());
  CHECK(t->seconds() == 1714564800);
  CHECK(t->nanos() == 250000000);
  for (const char* bad : {"not-a-time", "2024-05-01", "2024-13-01T00:00:00Z",
                          "2024-05-01T25:00:00Z", "2024-05-01 12:00:00Z", ""}) {
    INFO(bad);
    const auto r = ParseDateTime(after, bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("\"after\""));
  }
}

TEST_CASE("enum values in either spelling", "[gateway][params]") {
  const ParamSpec status =
      EnumQueryParam("status", v1::RunStatus_descriptor(), "RUN_STATUS_", true, "");
  CHECK(ParseEnum(status, "RUNNING").value() == v1::RUN_STATUS_RUNNING);
  CHECK(ParseEnum(status, "running").value() == v1::RUN_STATUS_RUNNING);
  CHECK(ParseEnum(status, "RUN_STATUS_QUEUED").value() == v1::RUN_STATUS_QUEUED);
  CHECK_FALSE(ParseEnum(status, "BOGUS").ok());
  CHECK_FALSE(ParseEnum(status, "UNSPECIFIED").ok());
  CHECK_FALSE(ParseEnum(status, "RUN_STATUS_UNSPECIFIED").ok());
  const auto err = ParseEnum(status, "BOGUS");
  CHECK_THAT(std::string(err.status().message()), Catch::Contains("\"status\""));
  CHECK_THAT(std::string(err.status().message()), Catch::Contains("RUNNING"));
  const std::vector<std::string> values = EnumValues(status);
  CHECK(values.front() == "PENDING");
  CHECK(std::find(values.begin(), values.end(), "RUN_STATUS_FAILED") != values.end());
  CHECK(std::find(values.begin(), values.end(), "UNSPECIFIED") == values.end());
}

TEST_CASE("KEY=VALUE parameters split at their first '='", "[gateway][params]") {
  const ParamSpec metadata = RepeatedQueryParam("metadata", ParamType::kKeyValue, "");
  CHECK(ParseKeyValue(metadata, "team=nlp").value() ==
        std::pair<std::string, std::string>{"team", "nlp"});
  CHECK(ParseKeyValue(metadata, "k=a=b").value().second == "a=b");
  CHECK(ParseKeyValue(metadata, "k=").value().second.empty());
  for (const char* bad : {"team", "=nlp", "", "k=\xff"}) {
    INFO(bad);
    const auto r = ParseKeyValue(metadata, bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("\"metadata\""));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("KEY=VALUE"));
  }
}

TEST_CASE("binding a query against a route's parameters", "[gateway][params]") {
  const std::vector<ParamSpec> params = {
      RepeatedQueryParam("name", ParamType::kString, ""),
      QueryParam("limit", ParamType::kCount, ""),
      PathParam("id", ParamType::kId, ""),  // not a query parameter
  };
  std::map<std::string, std::vector<std::string>> out;
  CHECK(BindQuery(params, {{"name", "a"}, {"name", "b"}, {"limit", "3"}}, out).ok());
  CHECK(out["name"] == std::vector<std::string>{"a", "b"});

  out.clear();
  auto st = BindQuery(params, {{"limit", "1"}, {"limit", "2"}}, out);
  CHECK_THAT(std::string(st.message()), Catch::Contains("\"limit\" may be given only once"));
  out.clear();
  st = BindQuery(params, {{"id", "x"}}, out);
  CHECK_THAT(std::string(st.message()), Catch::Contains("unknown query parameter \"id\""));
  out.clear();
  st = BindQuery(params, {{"limit", "x"}}, out);
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);

  ParamSpec required = QueryParam("q", ParamType::kString, "");
  required.required = true;
  out.clear();
  st = BindQuery({required}, {}, out);
  CHECK_THAT(std::string(st.message()), Catch::Contains("\"q\" is required"));
  out.clear();
  st = BindQuery({}, {{"x", "1"}}, out);
  CHECK_THAT(std::string(st.message()), Catch::Contains("takes none"));
}

}  // namespace params_test
}  // namespace tessera::gateway
