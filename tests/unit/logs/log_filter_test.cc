// GetLogs with since, until and grep: the lines printed in a window, or matching a pattern,
// served from the store page by page (tail included), and refused with the field's name when
// malformed.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/logs/line_filter.h"
#include "tests/unit/logs/log_test_fixture.h"

namespace tessera::logs::testing {
namespace log_filter_test {

google::protobuf::Timestamp At(int64_t millis) {
  return ToProtoTime(absl::FromUnixSeconds(1'700'000'000) + absl::Milliseconds(millis));
}

// 3,000 lines of rank 0 (a line every 10 ms, "step N loss ...", every 100th "ERROR ...") and
// a few of rank 1's stderr: more than a store page, so filters must page.
void PushMany(Fixture& f) {
  std::vector<v1::LogLine> batch;
  for (int i = 0; i < 3000; ++i) {
    batch.push_back(f.Line(0, kOut, i, i * 10,
                           i % 100 == 0 ? absl::StrCat("ERROR at step ", i)
                                        : absl::StrCat("step ", i, " loss 1.", i)));
    if (batch.size() == 500) {
      REQUIRE(f.Push(batch, absl::StrCat("b", i)).ok());
      batch.clear();
    }
  }
  REQUIRE(
      f.Push({f.Line(1, kErr, 0, 15, "warning: slow"), f.Line(1, kErr, 1, 29'995, "ERROR x")}, "e")
          .ok());
}

TEST_CASE("grep keeps the matching lines of every rank, in time order") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_COMPLETED);
  PushMany(f);
  auto req = Req();
  req.set_grep("^ERROR");
  Texts errors = f.Texts(req);
  REQUIRE(errors.size() == 31);
  CHECK(errors.front() == "ERROR at step 0");
  CHECK(errors[1] == "ERROR at step 100");
  CHECK(errors.back() == "ERROR x");
  req.set_grep("loss 1\\.29\\d\\d$");
  CHECK(f.Texts(req).size() == 99);  // 2901..2999 without 2900 (an ERROR line)
  req.set_grep("slow");
  CHECK(f.Texts(req) == Texts{"warning: slow"});
}

TEST_CASE("since and until keep the lines printed in the window, from the first chunk then") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_COMPLETED);
  PushMany(f);
  auto req = Req();
  *req.mutable_since() = At(25'000);
  *req.mutable_until() = At(25'050);
  CHECK(f.Texts(req) == Texts{"ERROR at step 2500", "step 2501 loss 1.2501",
                              "step 2502 loss 1.2502", "step 2503 loss 1.2503",
                              "step 2504 loss 1.2504"});
  req.clear_until();
  Texts since = f.Texts(req);
  CHECK(since.size() == 501);  // 2500..2999 and rank 1's last line
  CHECK(since.back() == "ERROR x");
  req.set_grep("ERROR");
  CHECK(f.Texts(req) == Texts{"ERROR at step 2500", "ERROR at step 2600", "ERROR at step 2700",
                              "ERROR at step 2800", "ERROR at step 2900", "ERROR x"});
}

TEST_CASE("tail with a filter is the last matching lines") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_COMPLETED);
  PushMany(f);
  auto req = Req();
  req.set_grep("ERROR at");
  req.set_tail(2);
  CHECK(f.Texts(req) == Texts{"ERROR at step 2800", "ERROR at step 2900"});
  req.set_rank(1);
  req.set_grep("ERROR");
  CHECK(f.Texts(req) == Texts{"ERROR x"});
}

TEST_CASE("a malformed filter is refused naming its field") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_COMPLETED);
  std::vector<std::string> out;
  auto req = Req();
  req.set_grep("(unclosed");
  auto st = f.Get(req, &out);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(absl::StrContains(st.message(), "grep: not a regular expression"));
  req.set_grep(std::string(kMaxGrepBytes + 1, 'a'));
  st = f.Get(req, &out);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(absl::StrContains(st.message(), "grep: at most 1024 bytes"));
  req.clear_grep();
  *req.mutable_since() = At(10);
  *req.mutable_until() = At(10);
  st = f.Get(req, &out);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(absl::StrContains(st.message(), "until: must be later than since"));
  req.clear_until();
  req.set_first_exception(true);
  st = f.Get(req, &out);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(absl::StrContains(st.message(), "first_exception"));
  CHECK(out.empty());
}

}  // namespace log_filter_test
}  // namespace tessera::logs::testing
