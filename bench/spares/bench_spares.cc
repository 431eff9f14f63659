// Issue 46's hot spares figure: how long a run whose node crashed takes to run again, when the
// node it resumes on has to pull its image (no spares: the bound) and when the pool keeps a hot
// spare that pulled it while the run trained. The image is the one examples/gpt-tiny.yaml runs
// in (about 700 MB, from a local registry); three sandboxed workers; a 2-node run of it; one of
// its nodes' workers killed. Printed: each round's crash-to-running time and the ratio
// spare / no spare. A Catch2 binary (the local cluster's helpers assert with it), run by hand:
//
//   ninja -C build bench_spares mcli tessera-server tessera-worker tessera-sandbox-init
//   ninja -C build tessera-train tessera-data
//   build/bench/bench_spares
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/oci_registry.h"
#include "tests/support/poll_until.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace {

int Pulls(const v1::RunDescription& described) {
  int pulls = 0;
  for (const auto& e : described.events()) pulls += absl::StartsWith(e.message(), "Pulling image");
  return pulls;
}

struct Round {
  double crash_to_running = 0;  // seconds
  int pulls_after = 0;          // "Pulling image" events of the resumed attempt
};

// One cluster, `spares` per pool: the run placed, the spare (if any) ready with its image, then
// a node of the run killed.
Round CrashOnce(const std::string& image, const std::string& registry, int spares) {
  LocalCluster c({"--spare-nodes-per-pool", std::to_string(spares)});
  for (const char* node : {"node-a", "node-b", "node-c"}) {
    c.StartWorker(node, 2, {"--sandbox", "bwrap", "--insecure-registry", registry});
    OpenToPassThrough(c.worker(node).state_dir);
  }
  v1::RunSpec spec;
  spec.set_name("bench-spares");
  spec.set_image(image);
  spec.set_command("echo started; sleep 3600");
  spec.mutable_compute()->set_gpus(4);
  spec.mutable_compute()->set_nodes(2);
  spec.mutable_scheduling()->set_retry_on_system_failure(true);
  const v1::Run submitted = SubmitSpec(*c.client, spec);
  const v1::Run running =
      c.client->WaitForStatus(submitted.name(), v1::RUN_STATUS_RUNNING, absl::Minutes(10));
  if (spares > 0) {
    REQUIRE(PollUntil(
        [&] {
          const v1::Node n = c.Node("node-a");
          return absl::StartsWith(n.spare_status(), "ready: 1 image");
        },
        absl::Minutes(10), absl::Milliseconds(200)));
  }
  const int pulls_before = Pulls(c.client->Describe(submitted.name()));
  const std::string victim = running.nodes(1).node_name();
  REQUIRE(c.worker(victim).process->Kill(SIGKILL).ok());
  const absl::Time killed = absl::Now();
  REQUIRE(PollUntil(
      [&] {
        const v1::Run r = c.client->Get(submitted.name());
        return r.resumption_index() == 1 && r.status() == v1::RUN_STATUS_RUNNING;
      },
      absl::Minutes(10), absl::Milliseconds(50)));
  Round round;
  round.crash_to_running = absl::ToDoubleSeconds(absl::Now() - killed);
  round.pulls_after = Pulls(c.client->Describe(submitted.name())) - pulls_before;
  return round;
}

TEST_CASE("bench_spares: a crashed node's run back on a hot spare against a cold node") {
  TempDir registry_dir("tessera-registry");
  auto registry = OciRegistry::Start(registry_dir.path);
  REQUIRE(registry.ok());
  auto image = registry->PushTrainingImage("tessera/train", "1", TESSERA_BIN_DIR);
  INFO(image.status().ToString());
  REQUIRE(image.ok());
  const Round cold = CrashOnce(*image, registry->address(), 0);
  const Round warm = CrashOnce(*image, registry->address(), 1);
  std::printf("no spare:  crash to running %.1f s (%d pull(s) on resuming)\n",
              cold.crash_to_running, cold.pulls_after);
  std::printf("hot spare: crash to running %.1f s (%d pull(s) on resuming)\n",
              warm.crash_to_running, warm.pulls_after);
  std::printf("ratio hot spare / no spare: %.2f\n", warm.crash_to_running / cold.crash_to_running);
  CHECK(warm.pulls_after == 0);
}

}  // namespace
}  // namespace tessera::testing
