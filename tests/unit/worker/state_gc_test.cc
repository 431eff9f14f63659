#include "worker/daemon/state_gc.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"
#include "worker/logship/spool_reader.h"

namespace tessera::worker {
namespace state_gc_test {
namespace fs = std::filesystem;

struct State {
  testing::TempDir tmp{"state_gc_test"};
  const std::string dir = tmp.path;
  std::string Attempt(const std::string& run, int k, bool shipped) {
    const std::string a = dir + "/runs/" + run + "/attempt-" + std::to_string(k);
    fs::create_directories(a + "/logs");
    fs::create_directories(a + "/work");
    const std::string spool = a + "/logs/rank-0.stdout";
    std::ofstream(spool) << "x\n";
    REQUIRE(SaveAckState(spool, {{2, 1}, shipped}).ok());
    return a;
  }
};

TEST_CASE("finished, shipped, old attempt folders are removed, nothing else is") {
  State s;
  const std::string done = s.Attempt("run-a", 0, /*shipped=*/true);
  const std::string unshipped = s.Attempt("run-b", 0, /*shipped=*/false);
  const std::string running = s.Attempt("run-c", 1, /*shipped=*/true);
  const absl::Time later = absl::Now() + absl::Hours(25);

  // Too recent: kept.
  CHECK(CollectFinishedAttempts(s.dir, {}, absl::Hours(24), absl::Now()) == 0);
  CHECK(CollectFinishedAttempts(s.dir, {{"run-c", 1}}, absl::Hours(24), later) == 1);
  CHECK_FALSE(fs::exists(done));
  CHECK_FALSE(fs::exists(s.dir + "/runs/run-a"));  // the empty run folder goes too
  CHECK(fs::exists(unshipped));                    // output not acknowledged yet
  CHECK(fs::exists(running));                      // still tracked by the worker
}

}  // namespace state_gc_test
}  // namespace tessera::worker
