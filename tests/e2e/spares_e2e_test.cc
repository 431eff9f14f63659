// Hot spares on real processes: tessera-server keeping one spare per pool
// (--spare-nodes-per-pool 1), three sandboxed workers pulling from a local registry, and a run's
// node crashed (its worker killed): the run resumes on the spare, which had pulled its image
// while the run trained, so nothing is pulled when it resumes; mcli says which node is the spare.
#include <signal.h>

#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/oci_registry.h"
#include "tests/support/poll_until.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace spares_e2e_test {

int Pulls(const v1::RunDescription& described) {
  int pulls = 0;
  for (const auto& e : described.events()) pulls += absl::StartsWith(e.message(), "Pulling image");
  return pulls;
}

TEST_CASE("a crashed node's run resumes at once on the pool's hot spare, without a pull", "[e2e]") {
  TempDir registry_dir("tessera-registry");
  auto registry = OciRegistry::Start(registry_dir.path);
  REQUIRE(registry.ok());
  auto image = registry->PushBusyboxImage("test/spare", "1", {"sh", "echo", "sleep"});
  INFO(image.status().ToString());
  REQUIRE(image.ok());

  LocalCluster c({"--spare-nodes-per-pool", "1"});
  for (const char* node : {"node-a", "node-b", "node-c"}) {
    c.StartWorker(node, 2, {"--sandbox", "bwrap", "--insecure-registry", registry->address()});
    OpenToPassThrough(c.worker(node).state_dir);
  }
  // node-a, first by name, is the spare: its checks pass with nothing yet to pull.
  const auto spare_is = [&](const std::string& node, const std::string& status) {
    return PollUntil(
        [&] {
          const v1::Node n = c.Node(node);
          return n.spare() && absl::StartsWith(n.spare_status(), status);
        },
        absl::Seconds(60), absl::Milliseconds(100));
  };
  REQUIRE(spare_is("node-a", "ready: 0 images"));

  v1::RunSpec spec;
  spec.set_name("on-two");
  spec.set_image(*image);
  spec.set_command("echo started; sleep 600");
  spec.mutable_compute()->set_gpus(4);
  spec.mutable_compute()->set_nodes(2);
  spec.mutable_scheduling()->set_retry_on_system_failure(true);
  const v1::Run submitted = SubmitSpec(*c.client, spec);
  const v1::Run running =
      c.client->WaitForStatus(submitted.name(), v1::RUN_STATUS_RUNNING, absl::Seconds(120));
  REQUIRE(running.nodes_size() == 2);
  for (const auto& n : running.nodes()) CHECK(n.node_name() != "node-a");
  CHECK(Pulls(c.client->Describe(submitted.name())) == 2);  // each of its nodes pulled it

  // The spare is sent the run's image and pulls it while the run trains.
  INFO(c.Node("node-a").spare_status());
  REQUIRE(spare_is("node-a", "ready: 1 image of its pool's running runs pulled"));
  ShellResult util = c.Mcli("util");
  INFO(util.output);
  CHECK(absl::StrContains(util.output, "SPARE"));
  CHECK(absl::StrContains(util.output, "2 (1 node)"));
  ShellResult nodes = c.Mcli("get nodes");
  INFO(nodes.output);
  CHECK(absl::StrContains(nodes.output, "hot spare: ready"));

  // One of the run's nodes crashes (its worker killed; its fence kills the ranks).
  const std::string victim = running.nodes(1).node_name();
  const std::string kept = running.nodes(0).node_name();
  REQUIRE(c.worker(victim).process->Kill(SIGKILL).ok());
  const absl::Time killed = absl::Now();
  v1::Run resumed;
  REQUIRE(PollUntil(
      [&] {
        resumed = c.client->Get(submitted.name());
        return resumed.resumption_index() == 1 && resumed.status() == v1::RUN_STATUS_RUNNING;
      },
      absl::Seconds(120), absl::Milliseconds(100)));
  std::printf("spares: resumed on the spare %.1f s after the crash (lease 3 s)\n",
              absl::ToDoubleSeconds(absl::Now() - killed));
  std::set<std::string> on;
  for (const auto& n : resumed.nodes()) on.insert(n.node_name());
  CHECK(on == std::set<std::string>{"node-a", kept});
  const v1::RunDescription described = c.client->Describe(submitted.name());
  CHECK(Pulls(described) == 2);  // the first attempt's, none since
  bool named = false;
  for (const auto& e : described.events()) {
    named = named || absl::StrContains(e.message(), "(node-a a hot spare of its pool");
  }
  CHECK(named);
  REQUIRE(described.attempts_size() == 2);
  CHECK(described.attempts(1).image_digest() == described.attempts(0).image_digest());
  // The spare now runs the resumption, and no idle node is left to be one.
  CHECK(PollUntil([&] { return !c.Node("node-a").spare(); }, absl::Seconds(30)));
  CHECK(c.client->Get(submitted.name()).status() == v1::RUN_STATUS_RUNNING);
}

}  // namespace spares_e2e_test
}  // namespace tessera::testing
