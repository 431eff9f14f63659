// first_exception: the first Python traceback or C++ terminate, with its context.
#include "services/logs/first_exception.h"

#include "tests/unit/logs/log_test_fixture.h"

namespace tessera::logs::testing {
namespace first_exception_test {

TEST_CASE("first_exception finds the first Python traceback with context before it") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_FAILED);
  std::vector<std::string> rank1 = {
      "step 1 loss 2.0",
      "step 2 loss 1.9",
      "[rank1]: Traceback (most recent call last):",
      "[rank1]:   File \"train.py\", line 3, in <module>",
      "[rank1]:     main()",
      "[rank1]: RuntimeError: CUDA error: an illegal memory access",
      "",
      "During handling of the above exception, another exception occurred:",
      "Traceback (most recent call last):",
      "ValueError: second",
  };
  std::vector<v1::LogLine> lines;
  for (size_t i = 0; i < rank1.size(); ++i) {
    lines.push_back(
        f.Line(1, kErr, static_cast<int64_t>(i), 10 + static_cast<int64_t>(i), rank1[i] + "\n"));
  }
  // Rank 0 prints between rank 1's lines; its own traceback starts later.
  lines.push_back(f.Line(0, kOut, 0, 12, "rank 0 working\n"));
  lines.push_back(f.Line(0, kErr, 0, 30, "Traceback (most recent call last):\n"));
  lines.push_back(f.Line(0, kErr, 1, 31, "KeyError: 'x'\n"));
  REQUIRE(f.Push(lines).ok());
  auto req = Req();
  req.set_first_exception(true);
  req.set_rank(1);  // not the failed rank by default: no failed rank is recorded
  Texts got = f.Texts(req);
  REQUIRE(got.size() == 6);
  CHECK(got[0] == "step 1 loss 2.0\n");
  CHECK(got[2] == "[rank1]: Traceback (most recent call last):\n");
  CHECK(got[5] == "[rank1]: RuntimeError: CUDA error: an illegal memory access\n");
  req.clear_rank();
  CHECK(f.Texts(req).size() == 6);  // rank 1's starts first
  req.set_rank(0);
  CHECK(f.Texts(req) ==
        Texts{"rank 0 working\n", "Traceback (most recent call last):\n", "KeyError: 'x'\n"});
}

TEST_CASE("first_exception finds a C++ terminate with its what() line, none is NOT_FOUND") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_FAILED);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "loading"), f.Line(0, kErr, 0, 2, "warming up"),
                  f.Line(0, kErr, 1, 3,
                         "terminate called after throwing an instance of 'std::runtime_error'"),
                  f.Line(0, kErr, 2, 4, "  what():  shard 3 is corrupt"),
                  f.Line(0, kErr, 3, 5, "Aborted (core dumped)"), f.Line(1, kOut, 0, 6, "fine")})
              .ok());
  auto req = Req();
  req.set_first_exception(true);
  CHECK(f.Texts(req) == Texts{"loading", "warming up",
                              "terminate called after throwing an instance of 'std::runtime_error'",
                              "  what():  shard 3 is corrupt"});
  req.set_rank(1);
  Texts out;
  auto st = f.Get(req, &out);
  CHECK(absl::IsNotFound(st));
  CHECK(st.message() == "no exception in the logs of run r attempt 0 rank 1");
}

TEST_CASE("a traceback cut short by the end of the log is shown as far as it goes") {
  ExceptionFinder finder(1);
  v1::LogLine l;
  l.set_text("before");
  CHECK_FALSE(finder.Add(l));
  l.set_text("Traceback (most recent call last):");
  CHECK_FALSE(finder.Add(l));
  l.set_text("  File \"x.py\", line 1");
  CHECK_FALSE(finder.Add(l));
  CHECK(finder.Result().size() == 3);
  l.set_text("OSError: disk");
  CHECK(finder.Add(l));
  CHECK(finder.Result().size() == 4);
}

}  // namespace first_exception_test
}  // namespace tessera::logs::testing
