// mcli's health commands against the fake services: what a sweep shows of its suspects.

#include <catch2/catch.hpp>

#include "tests/integration/cli/mcli_runner.h"

using namespace mcli_test;  // NOLINT: the fakes and the runner are this test's vocabulary

TEST_CASE(
    "health show lists the suspects measured again, the inconclusive nodes and those found "
    "slow once",
    "[cli][health]") {
  FakeServer& server = Server();
  Result r = Mcli({"health", "show", "sweep-suspects"});
  INFO(r);
  REQUIRE(r.exit_code == 0);
  CHECK(server.recorder.LastAs<v1::GetSweepRequest>("GetSweep").id() == "sweep-suspects");
  CHECK_THAT(r.out,
             Catch::Contains("Inconclusive") && Catch::Contains("node-6") &&
                 Catch::Contains("Follows") && Catch::Contains("sweep-1") &&
                 Catch::Contains("Suspects measured again:") &&
                 Catch::Contains("  node-4: slow: 0.793 x its peers' compute rate over 3 pairs") &&
                 Catch::Contains("  node-6: inconclusive: 0.917 x its peers") &&
                 Catch::Contains("Found slow") && Catch::Contains("node-7") &&
                 Catch::Contains("not cordoned on one sweep"));
  // A sweep without suspects says none are inconclusive and lists no suspects.
  r = Mcli({"health", "show", "sweep-2"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, !Catch::Contains("Suspects measured again") && !Catch::Contains("Found slow"));
}
