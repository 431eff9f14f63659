// tessera-train started once per node: which ranks it starts, with what, and how the node's
// launch ends when one of them fails (real processes: /bin/sh as the rank program).
#include "worker/engine/train/local_ranks.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>

#include "tests/support/temp_dir.h"

namespace tessera::engine {
namespace local_ranks_test {

using testing::TempDir;

TEST_CASE("a node's launch starts one rank per local GPU, numbered from the node's first rank",
          "[engine]") {
  auto plan = PlanLocalRanks({{"NODE_RANK", "1"},
                              {"LOCAL_WORLD_SIZE", "2"},
                              {"WORLD_SIZE", "4"},
                              {"TESSERA_PROGRESS_DIR", "/p"},
                              {"MASTER_ADDR", "10.0.0.1"}});
  REQUIRE(plan.ok());
  REQUIRE(plan->has_value());
  const auto& ranks = **plan;
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0].at("RANK") == "2");
  CHECK(ranks[0].at("LOCAL_RANK") == "0");
  CHECK(ranks[1].at("RANK") == "3");
  CHECK(ranks[1].at("LOCAL_RANK") == "1");
  CHECK(ranks[1].at("TESSERA_PROGRESS_FILE") == "/p/rank-3.progress");
  CHECK(ranks[1].at("MASTER_ADDR") == "10.0.0.1");  // the rest of the launcher's environment

  // Tessera's first rank wins over NODE_RANK × LOCAL_WORLD_SIZE (nodes need not be alike).
  auto uneven = PlanLocalRanks({{"NODE_RANK", "1"},
                                {"LOCAL_WORLD_SIZE", "1"},
                                {"WORLD_SIZE", "3"},
                                {"TESSERA_FIRST_RANK", "2"}});
  REQUIRE(uneven.ok());
  CHECK((**uneven)[0].at("RANK") == "2");
  CHECK((**uneven)[0].count("TESSERA_PROGRESS_FILE") == 0);  // no folder named: none
}

TEST_CASE("a rank, or a program run alone, starts nothing, and bad numbers are named", "[engine]") {
  CHECK_FALSE(PlanLocalRanks({{"RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}})->has_value());
  CHECK_FALSE(PlanLocalRanks({})->has_value());
  auto bad = PlanLocalRanks({{"LOCAL_WORLD_SIZE", "zero"}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "LOCAL_WORLD_SIZE=zero: must be an integer of at least 1");
  auto beyond =
      PlanLocalRanks({{"NODE_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}, {"WORLD_SIZE", "4"}});
  REQUIRE_FALSE(beyond.ok());
  CHECK(beyond.status().message() == "this node's ranks 4..5 do not fit WORLD_SIZE=4");
}

std::vector<RankEnvironment> TwoRanks(const std::string& dir) {
  return **PlanLocalRanks(
      {{"NODE_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}, {"OUT", dir}, {"PATH", "/usr/bin:/bin"}});
}

TEST_CASE("every local rank runs with its own RANK and the launch succeeds when all do",
          "[engine]") {
  TempDir out;
  const int code = RunLocalRanks("/bin/sh", {"sh", "-c", "echo $RANK/$LOCAL_RANK > $OUT/r$RANK"},
                                 TwoRanks(out.path), absl::Seconds(5));
  CHECK(code == 0);
  for (int r : {0, 1}) {
    std::ifstream in(out.path + "/r" + std::to_string(r));
    std::string line;
    std::getline(in, line);
    CHECK(line == std::to_string(r) + "/" + std::to_string(r));
  }
}

TEST_CASE("the first rank to fail stops the others, and the launch ends with its code",
          "[engine]") {
  TempDir out;
  // Rank 0 would run for a minute; rank 1 fails as soon as rank 0 is ready to be told to stop.
  // The launcher must not wait for rank 0.
  const auto begin = std::chrono::steady_clock::now();
  const int code = RunLocalRanks("/bin/sh",
                                 {"sh", "-c",
                                  "if [ $RANK = 1 ]; then while [ ! -e $OUT/ready ]; do sleep "
                                  "0.01; done; exit 3; fi; sleep 60 & s=$!; trap 'kill $s; echo "
                                  "stopped > $OUT/r0; exit 0' TERM; touch $OUT/ready; wait"},
                                 TwoRanks(out.path), absl::Seconds(20));
  const auto took = std::chrono::steady_clock::now() - begin;
  CHECK(code == 3);
  CHECK(took < std::chrono::seconds(60));
  // Rank 0 was told to stop (SIGTERM: it could checkpoint), not killed outright.
  std::ifstream in(out.path + "/r0");
  std::string line;
  std::getline(in, line);
  CHECK(line == "stopped");
}

TEST_CASE("a rank that ignores the stop is killed after the grace", "[engine]") {
  TempDir out;
  const int code = RunLocalRanks(
      "/bin/sh", {"sh", "-c", "if [ $RANK = 1 ]; then kill -9 $$; fi; trap '' TERM; exec sleep 60"},
      TwoRanks(out.path), absl::Milliseconds(200));
  CHECK(code == 128 + 9);  // rank 1's end, not rank 0's
}

}  // namespace local_ranks_test
}  // namespace tessera::engine
