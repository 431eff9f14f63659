// A switch named at fault through the health API's handler (fakes of the scheduler and cordon
// service, a fake clock): its nodes are taken out together with one reason and return together.
#include <catch2/catch.hpp>
#include <set>

#include "absl/strings/match.h"
#include "tests/support/metric_values.h"
#include "tests/unit/health/handler_fixture.h"

namespace tessera::health {
namespace fabric_remediation_test {
using namespace handler_test;  // NOLINT: the fixture is this test's vocabulary

// Answers the all-reduce canaries dispatched so far as a fabric with `down` nodes would: each of
// them ERROR (no peer reachable), their partners TIMEOUT, every other pair at 5 GB/s.
void AnswerAllReduce(Fixture& f, const std::set<std::string>& down) {
  for (const auto& d : f.scheduler->Take(v1::HEALTH_CHECK_KIND_ALLREDUCE)) {
    bool pair_down = false;
    for (const auto& m : d.start_canary().group()) pair_down = pair_down || down.count(m) > 0;
    v1::ReportHealthResultRequest req;
    auto* r = req.mutable_result();
    r->set_sweep_id(d.start_canary().sweep_id());
    r->set_node_name(d.node_name());
    r->set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
    *r->mutable_group() = d.start_canary().group();
    if (down.count(d.node_name())) {
      r->set_verdict(v1::HEALTH_VERDICT_ERROR);
      r->set_error("no peer reachable");
    } else if (pair_down) {
      r->set_verdict(v1::HEALTH_VERDICT_TIMEOUT);
      r->set_error("the partner never came");
    } else {
      r->set_verdict(v1::HEALTH_VERDICT_PASSED);
      auto* s = r->add_samples();
      s->set_payload_bytes(64 << 20);
      s->set_busbw_gbps(5.0);
    }
    v1::ReportHealthResultResponse resp;
    REQUIRE(f.handler->ReportHealthResult(kSystem, req, &resp).ok());
  }
}

v1::Sweep RunWithLinksDown(Fixture& f, const std::string& id, const std::set<std::string>& down) {
  for (int i = 0; i < 100 && f.Sweep(id).state() == v1::SWEEP_STATE_RUNNING; ++i) {
    f.health.Tick();
    f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
    AnswerAllReduce(f, down);
    f.clock->Advance(absl::Milliseconds(200));
  }
  return f.Sweep(id);
}

struct SwitchedFixture : Fixture {
  explicit SwitchedFixture(HealthConfig config = {}) : Fixture(config) {
    for (const auto& [node, sw] : std::vector<std::pair<std::string, std::string>>{
             {"a", "sw-1"}, {"b", "sw-1"}, {"c", "sw-2"}, {"d", "sw-2"}}) {
      (*scheduler->Add(node).mutable_labels())["switch"] = sw;
    }
  }
};

TEST_CASE("a switch's nodes are cordoned together, with one reason naming it and the evidence") {
  SwitchedFixture f;
  f.scheduler->runs_on["c"] = {"gpt-1"};
  const v1::Sweep done = RunWithLinksDown(f, f.Start().id(), {"c", "d"});
  REQUIRE(done.state() == v1::SWEEP_STATE_FINISHED);
  REQUIRE(done.fabric_faults_size() == 1);
  const v1::FabricFault& fault = done.fabric_faults(0);
  CHECK(fault.label() == "switch");
  CHECK(fault.value() == "sw-2");
  CHECK(std::set<std::string>(done.anomalous_nodes().begin(), done.anomalous_nodes().end()) ==
        std::set<std::string>{"c", "d"});
  // One finding for the switch, not one per node.
  REQUIRE(done.findings_size() == 1);
  CHECK(absl::StartsWith(done.findings(0), "switch sw-2 (c, d): all 3 all-reduce pairs"));
  REQUIRE(f.cordon->cordoned.size() == 2);
  CHECK(f.cordon->cordoned[0].second == f.cordon->cordoned[1].second);
  CHECK(f.cordon->cordoned[0].second == "health: sweep " + done.id() + ": " + fault.finding());
  const auto& e = f.cordon->evidence[0].fields();
  CHECK(e.at("fabric_label").string_value() == "switch");
  CHECK(e.at("fabric_value").string_value() == "sw-2");
  CHECK(e.at("fabric_nodes_named").string_value() == "c,d");
  CHECK(absl::StartsWith(e.at("fabric_pair_1").string_value(), "b+c: "));
  CHECK(e.at("fabric_pairs_bad").number_value() == 3);
  // The runs there are evicted as a node failure, detected by the sweep.
  REQUIRE(f.scheduler->evicted.size() == 2);
  CHECK(f.scheduler->evicted[0].reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK(f.scheduler->evicted[0].detection_method() == v1::DETECTION_METHOD_CANARY_SWEEP);
  CHECK(tessera::testing::MetricValue(f.registry, "tessera_health_fabric_faults_total",
                                      {"switch"}) == 1);
}

TEST_CASE("a switch's nodes return together, once every one of them has passed") {
  HealthConfig config;
  config.uncordon_after_passes = 1;
  SwitchedFixture f(config);
  RunWithLinksDown(f, f.Start().id(), {"c", "d"});
  REQUIRE(f.cordon->cordoned.size() == 2);
  // c passes a sweep without d: c waits for d.
  const v1::Sweep without_d = RunWithLinksDown(f, f.Start({"a", "b", "c"}).id(), {});
  CHECK(without_d.anomalous_nodes().empty());
  CHECK(f.cordon->uncordoned.empty());
  CHECK(f.scheduler->nodes["c"].admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  // Both pass: both return, in one go.
  RunWithLinksDown(f, f.Start().id(), {});
  REQUIRE(f.cordon->uncordoned.size() == 2);
  CHECK(std::set<std::string>{f.cordon->uncordoned[0].first, f.cordon->uncordoned[1].first} ==
        std::set<std::string>{"c", "d"});
  for (const auto& [node, reason] : f.cordon->uncordoned) {
    CHECK(absl::EndsWith(reason,
                         " sweeps in a row, with the 1 other node(s) of the same fabric "
                         "fault"));
  }
}

TEST_CASE("a switch whose node another tenant shared is judged node by node") {
  SwitchedFixture f;
  v1::Run hog;
  hog.set_name("hog");
  hog.set_user("mallory");
  hog.add_nodes()->set_node_name("d");
  f.runs->running = {hog};
  const v1::Sweep done = RunWithLinksDown(f, f.Start().id(), {"c", "d"});
  CHECK(done.fabric_faults().empty());
  // c is taken out on its own pairs; d's verdict waits until it is idle.
  CHECK(std::find(done.anomalous_nodes().begin(), done.anomalous_nodes().end(), "c") !=
        done.anomalous_nodes().end());
  CHECK(std::find(done.anomalous_nodes().begin(), done.anomalous_nodes().end(), "d") ==
        done.anomalous_nodes().end());
}

}  // namespace fabric_remediation_test
}  // namespace tessera::health
