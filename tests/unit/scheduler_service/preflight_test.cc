// Pre-flight checks as the scheduler sees them: what each node's start command expects (its
// GPUs' UUIDs, the cluster's driver, the clock bound), and a node that fails its checks cordoned
// with the evidence while the run goes elsewhere without using a retry.
#include "proto/policy/preflight.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "scheduler/service/preflight_cordon.h"
#include "scheduler/service/start_message.h"
#include "tests/support/metric_values.h"
#include "tests/unit/scheduler_service/scheduler_fixture.h"
#include "transport/metrics/registry.h"

namespace tessera::scheduler {
namespace preflight_test {

void RegisterWithGpus(Fixture& f, const std::string& name, const std::string& driver) {
  f.workers->Attach(name, [&f, name](const v1::ControlMessage& m) {
    f.sent.emplace_back(name, m);
    return true;
  });
  v1::RegisterWorker reg;
  v1::Node& n = *reg.mutable_node();
  n.set_name(name);
  n.set_cluster("local");
  n.set_gpu_type("sim");
  n.set_gpu_count(8);
  n.set_driver_version(driver);
  for (int i = 0; i < 8; ++i) {
    auto* g = n.add_gpus();
    g->set_index(i);
    g->set_uuid(name + "-gpu-" + std::to_string(i));
  }
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
}

const v1::StartAttempt* StartSentTo(const Fixture& f, const std::string& node) {
  const v1::StartAttempt* found = nullptr;
  for (const auto& [to, m] : f.sent) {
    if (to == node && m.has_start_attempt()) found = &m.start_attempt();
  }
  return found;
}

TEST_CASE("a cluster's driver is the one most of its nodes run, a tie names none") {
  std::vector<v1::Node> nodes(5);
  const char* drivers[] = {"580", "580", "550", "", "580"};
  for (int i = 0; i < 5; ++i) {
    nodes[static_cast<size_t>(i)].set_cluster(i < 4 ? "a" : "b");
    nodes[static_cast<size_t>(i)].set_driver_version(drivers[i]);
  }
  auto versions = ClusterDriverVersions(nodes);
  CHECK(versions.at("a") == "580");  // 2 of the 3 with a driver
  CHECK(versions.at("b") == "580");
  nodes[0].set_driver_version("560");
  versions = ClusterDriverVersions(nodes);
  CHECK(versions.count("a") == 0);  // 1 of 3 each: no majority, nothing checked
}

TEST_CASE("a start command carries what the node's pre-flight checks expect") {
  Fixture f;
  RegisterWithGpus(f, "n1", "580");
  RegisterWithGpus(f, "n2", "580");
  RegisterWithGpus(f, "n3", "550");
  const v1::Run run = f.Submit(8, /*retry=*/false);
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  const v1::Run placed = f.Get(run);
  REQUIRE(placed.nodes_size() == 1);
  const std::string node = placed.nodes(0).node_name();
  const v1::StartAttempt* start = StartSentTo(f, node);
  REQUIRE(start != nullptr);
  REQUIRE(start->preflight().gpu_uuids_size() == start->gpu_indices_size());
  for (int k = 0; k < start->gpu_indices_size(); ++k) {
    CHECK(start->preflight().gpu_uuids(k) ==
          node + "-gpu-" + std::to_string(start->gpu_indices(k)));
  }
  CHECK(start->preflight().driver_version() == "580");
  CHECK(start->preflight().max_clock_skew_seconds() == 10);
}

TEST_CASE("a node failing its pre-flight checks is cordoned with them, the run placed elsewhere") {
  Fixture f;
  metrics::Registry registry;
  f.core = f.NewCore(nullptr, &registry);
  RegisterWithGpus(f, "n1", "");
  const v1::Run run = f.Submit(8, /*retry=*/false);  // not even one retry to spare
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.Get(run).status() == v1::RUN_STATUS_STARTING);

  v1::AttemptUpdate failed;
  failed.set_run_id(run.id());
  failed.set_resumption_index(0);
  failed.set_phase(v1::ATTEMPT_PHASE_START_FAILED);
  failed.set_detail("pre-flight checks failed: shm: /dev/shm has 0.06 GiB free");
  auto* gpus = failed.add_preflight_checks();
  gpus->set_name("gpus");
  gpus->set_passed(true);
  gpus->set_detail("8 of 8 GPUs present with the UUIDs they registered with");
  auto* shm = failed.add_preflight_checks();
  shm->set_name("shm");
  shm->set_passed(false);
  shm->set_detail("/dev/shm has 0.06 GiB free of 0.06 GiB; 1GiB required");
  shm->set_seconds(0.001);
  REQUIRE(f.core->sessions->OnAttemptUpdate("n1", failed).ok());
  // Counted by the check that failed, for the operators' dashboards and alerts.
  CHECK(testing::MetricValue(registry, "tessera_preflight_failures_total", {"shm"}) == 1);
  CHECK_FALSE(
      testing::MetricValue(registry, "tessera_preflight_failures_total", {"gpus"}).has_value());

  const v1::Node n1 = *f.stores.nodes->GetNode("n1");
  CHECK(n1.admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  // The reason, which every user reads in the node list, names no run: the evidence does.
  CHECK(n1.status_reason() ==
        "preflight: failed its pre-flight checks before a run could start: shm: /dev/shm has 0.06 "
        "GiB free of 0.06 GiB; 1GiB required");
  v1::NodeEventFilter filter;
  filter.add_node_names("n1");
  filter.add_types(v1::NODE_EVENT_TYPE_CORDONED);
  auto events = f.stores.node_events->ListNodeEvents(filter);
  REQUIRE(events.ok());
  REQUIRE(events->size() == 1);
  const auto& e = events->front().evidence().fields();
  CHECK(e.at("run_name").string_value() == run.name());
  CHECK(e.at("check shm").string_value() ==
        "FAILED in 0.001 s: /dev/shm has 0.06 GiB free of 0.06 GiB; 1GiB required");
  CHECK(absl::StartsWith(e.at("check gpus").string_value(), "passed in 0 s: 8 of 8 GPUs"));

  const v1::Run after = f.Get(run);
  CHECK(after.status() == v1::RUN_STATUS_QUEUED);
  CHECK(after.resumption_index() == 1);
  CHECK(after.retries_used() == 0);
  CHECK(after.preflight_failures() == 1);
  auto attempts = f.stores.runs->ListAttempts(run.id());
  REQUIRE(attempts.ok());
  CHECK(attempts->front().end_reason() == v1::ATTEMPT_END_REASON_PREFLIGHT_FAILED);
  CHECK(attempts->front().detection_method() == v1::DETECTION_METHOD_PREFLIGHT);
  auto run_events = f.stores.runs->ListEvents(run.id(), 0, 100);
  REQUIRE(run_events.ok());
  bool said = false;
  for (const auto& ev : *run_events) {
    said = said || ev.message() ==
                       "Attempt did not start: n1 failed its pre-flight checks (shm: /dev/shm "
                       "has 0.06 GiB free of 0.06 GiB; 1GiB required); the node is cordoned and "
                       "the run placed elsewhere (not counted against max_retries)";
  }
  CHECK(said);

  // The run waits for a healthy node, and starts on the one that comes.
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_QUEUED);
  RegisterWithGpus(f, "n2", "");
  REQUIRE(f.core->cycle->RunCycle().ok());
  const v1::Run moved = f.Get(run);
  CHECK(moved.status() == v1::RUN_STATUS_STARTING);
  REQUIRE(moved.nodes_size() == 1);
  CHECK(moved.nodes(0).node_name() == "n2");
}

TEST_CASE("a node that is already out of service keeps its cordon and reason") {
  Fixture f;
  RegisterWithGpus(f, "n1", "");
  v1::Node n = *f.stores.nodes->GetNode("n1");
  n.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  n.set_status_reason("operator: cable");
  REQUIRE(f.stores.nodes->UpdateNode(n, n.version(), {}).ok());
  v1::Run run;
  run.set_name("r");
  PreflightChecks checks;
  checks.Add()->set_name("shm");
  REQUIRE(CordonAfterPreflight(*f.stores.nodes, "n1", run, checks, f.clock->Now()).ok());
  CHECK(f.stores.nodes->GetNode("n1")->status_reason() == "operator: cable");
  CHECK(FailedPreflightChecks(checks) == "shm: ");
}

}  // namespace preflight_test
}  // namespace tessera::scheduler
