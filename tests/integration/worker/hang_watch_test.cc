// The worker's hang watch on real processes (tessera-server, a worker, a rank that is a shell):
// a rank that said it is ready to take its first step (a ready record, as tessera-train writes
// one and tessera_sdk.progress's ready() does) and then spins, using CPU but finishing no step,
// is hung at its hang_timeout, its attempt ended and the circumstance named.
#include <catch2/catch.hpp>
#include <thread>

#include "absl/strings/match.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/local_cluster.h"

namespace tessera::testing {
namespace hang_watch_test {

TEST_CASE("a rank that spins in its first step after its ready record is hung at the timeout",
          "[integration]") {
  LocalCluster c({"--min-hang-timeout-seconds", "1", "--canary-compute-seconds", "0.2",
                  "--canary-timeout-seconds", "20"});
  c.StartWorker("node-a", 2);
  v1::RunSpec spec;
  spec.set_name("spins");
  // Ready at step 0, then a busy loop: the CPU polling a GPU kernel that never returns.
  spec.set_command(
      "echo '{\"step\":0,\"ready\":true,\"time\":'$(date +%s)'}' >> "
      "\"$TESSERA_PROGRESS_DIR/rank-$TESSERA_FIRST_RANK.progress\"; while :; do :; done");
  spec.mutable_compute()->set_gpus(1);
  spec.mutable_scheduling()->set_hang_timeout_seconds(2);
  const std::string name = SubmitSpec(*c.client, spec).name();
  c.client->WaitForStatus(name, v1::RUN_STATUS_RUNNING);
  const absl::Time running = absl::Now();

  v1::RunDescription described;
  while (absl::Now() - running < absl::Seconds(60)) {
    described = c.client->Describe(name);
    if (described.interruptions_size() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(described.DebugString());
  REQUIRE(described.interruptions_size() > 0);
  const v1::Interruption& hang = described.interruptions(0);
  CHECK(hang.cause() == v1::ATTEMPT_END_REASON_HANG);
  CHECK(hang.detection_method() == v1::DETECTION_METHOD_HANG_TIMEOUT);
  CHECK(absl::StrContains(hang.detail(), "in its first step: ready at step 0"));
  // The run's progress never showed a step: the ready record is none.
  std::printf("hung in its first step: attempt ended %.1f s after it started running\n",
              absl::ToDoubleSeconds(absl::Now() - running));
  CHECK(described.run().progress().step() == 0);
}

}  // namespace hang_watch_test
}  // namespace tessera::testing
