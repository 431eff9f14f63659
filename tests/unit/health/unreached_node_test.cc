// A node a sweep could not reach (its worker not connected to the scheduler) is not measured: no
// evidence about its hardware, so neither condemned nor passed. Its lease decides whether it is
// lost; the sweep lists it and measures it again once it is back. Also: a late acknowledgement
// is not a failure, a refusal to start the canary is.
#include <catch2/catch.hpp>

#include "healthcheck/anomaly.h"
#include "healthcheck/confirmation.h"
#include "healthcheck/sweep_plan.h"
#include "tests/unit/health/confirmation_results.h"
#include "tests/unit/health/handler_fixture.h"

namespace tessera::health {
namespace unreached_node_test {
using handler_test::Fixture;
using testing::Measured;

constexpr char kNotConnected[] = "the worker of node d is not connected";

v1::HealthCheckResult NotReached(const std::string& node, v1::HealthCheckKind kind, int step = 0,
                                 const std::vector<std::string>& group = {}) {
  v1::HealthCheckResult r = Measured(node, 0, step, v1::HEALTH_VERDICT_UNSPECIFIED);
  r.set_kind(kind);
  r.set_error(kNotConnected);
  for (const auto& m : group) r.add_group(m);
  return r;
}

v1::HealthCheckResult AllReduce(const std::string& node, const std::vector<std::string>& group,
                                v1::HealthVerdict verdict) {
  v1::HealthCheckResult r;
  r.set_node_name(node);
  r.set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
  for (const auto& m : group) r.add_group(m);
  r.set_verdict(verdict);
  if (verdict == v1::HEALTH_VERDICT_PASSED) {
    auto* s = r.add_samples();
    s->set_payload_bytes(64 << 20);
    s->set_busbw_gbps(5.0);
  } else {
    r.set_error("no peer came to the rendezvous");
  }
  return r;
}

TEST_CASE("a check never handed to its node is no evidence: not condemned, its pairs not judged") {
  const std::vector<std::string> nodes = {"a", "b", "c", "d"};
  const auto groups = RingPairs(nodes);
  REQUIRE(groups.size() == 4);
  std::vector<v1::HealthCheckResult> results = {
      Measured("a", 1.0), Measured("b", 1.0), Measured("c", 1.0),
      NotReached("d", v1::HEALTH_CHECK_KIND_COMPUTE_STRESS)};
  for (const auto& g : groups) {
    const bool with_d = std::count(g.begin(), g.end(), "d") > 0;
    for (const auto& m : g) {
      // d's partners waited for it in vain.
      results.push_back(
          m == "d"
              ? NotReached("d", v1::HEALTH_CHECK_KIND_ALLREDUCE, 0, g)
              : AllReduce(m, g, with_d ? v1::HEALTH_VERDICT_TIMEOUT : v1::HEALTH_VERDICT_PASSED));
    }
  }
  CHECK(FindAnomalies(nodes, groups, results, AnomalyConfig{}).empty());
  const auto judged = JudgeGroups(groups, results, AnomalyConfig{});
  int unjudged = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const bool with_d = std::count(groups[g].begin(), groups[g].end(), "d") > 0;
    CHECK(judged[g].measured == !with_d);
    CHECK_FALSE(judged[g].bad);
    if (with_d) {
      ++unjudged;
      CHECK(judged[g].why == std::string("d was not measured: ") + kNotConnected);
    }
  }
  CHECK(unjudged == 2);
  const auto unmeasured = UnmeasuredNodes(nodes, results);
  REQUIRE(unmeasured.size() == 1);
  CHECK(unmeasured.at("d") == kNotConnected);

  SECTION("a partner whose only judged pair failed is still implicated") {
    for (auto& r : results) {
      const std::vector<std::string> g(r.group().begin(), r.group().end());
      if (r.kind() == v1::HEALTH_CHECK_KIND_ALLREDUCE && r.node_name() == "c" &&
          std::count(g.begin(), g.end(), "d") == 0) {
        r = AllReduce("c", g, v1::HEALTH_VERDICT_ERROR);
      }
    }
    const auto found = FindAnomalies(nodes, groups, results, AnomalyConfig{});
    REQUIRE(found.size() == 1);  // b is cleared by its pair with a; c has no other judged pair
    CHECK(found[0].node == "c");
    CHECK(found[0].verdict == v1::HEALTH_VERDICT_ERROR);
  }
  SECTION("a node with no result at all still times out") {
    results.erase(results.begin() + 3);  // d's compute check: now simply missing
    const auto found = FindAnomalies(nodes, {}, results, AnomalyConfig{});
    REQUIRE(found.size() == 1);
    CHECK(found[0].node == "d");
    CHECK(found[0].verdict == v1::HEALTH_VERDICT_TIMEOUT);
  }
}

TEST_CASE("a suspect out of reach for its re-measurement is inconclusive, not condemned") {
  // The line: peer p, suspect s, peer q. s could not be reached for its step.
  const std::vector<v1::HealthCheckResult> results = {
      Measured("p", 1.0, 1), NotReached("s", v1::HEALTH_CHECK_KIND_COMPUTE_STRESS, 2),
      Measured("q", 1.0, 3)};
  const ConfirmationPlan plan = PlanConfirmation({"s"}, {"p", "q"}, results, {});
  CHECK(plan.next_node.empty());
  const SuspectOutcome& o = plan.outcomes.at("s");
  CHECK(o.test.decision == SequentialDecision::kInconclusive);
  CHECK(o.fault == v1::HEALTH_VERDICT_UNSPECIFIED);
  CHECK(DescribeOutcome("s", o).find(std::string("then not measured: ") + kNotConnected) !=
        std::string::npos);
  const ConfirmationVerdicts verdicts = JudgeConfirmation(plan, nullptr, {});
  CHECK(verdicts.anomalies.empty());
  CHECK(verdicts.inconclusive == std::vector<std::string>{"s"});
}

std::vector<v1::Sweep> FollowUps(Fixture& f, const std::string& id) {
  std::vector<v1::Sweep> out;
  const auto sweeps = f.stores.health->ListSweeps(100);
  REQUIRE(sweeps.ok());
  for (const auto& s : *sweeps) {
    if (s.follows_sweep_id() == id) out.push_back(s);
  }
  return out;
}

TEST_CASE("a node whose worker is not connected is listed as not measured, never cordoned") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  f.scheduler->unreachable.insert("d");
  const v1::Sweep done = f.RunToEnd(f.Start().id());
  REQUIRE(done.state() == v1::SWEEP_STATE_FINISHED);
  CHECK(done.anomalous_nodes_size() == 0);
  CHECK(f.cordon->cordoned.empty());
  CHECK(f.scheduler->evicted.empty());
  CHECK(std::vector<std::string>(done.inconclusive_nodes().begin(),
                                 done.inconclusive_nodes().end()) == std::vector<std::string>{"d"});
  REQUIRE(done.findings_size() == 1);
  CHECK(done.findings(0).rfind(
            "not measured: d: the canary could not be handed to the node: the worker of node d "
            "is not connected; not judged by this sweep",
            0) == 0);
  CHECK(NotMeasuredIn(done, "d"));
  CHECK_FALSE(NotMeasuredIn(done, "a"));

  SECTION("back online, a follow-up measures it again") {
    const auto follow_ups = FollowUps(f, done.id());
    REQUIRE(follow_ups.size() == 1);
    f.scheduler->unreachable.clear();
    const v1::Sweep again = f.RunToEnd(follow_ups[0].id());
    CHECK(again.state() == v1::SWEEP_STATE_FINISHED);
    CHECK(again.findings_size() == 0);
    CHECK(again.inconclusive_nodes_size() == 0);
  }
}

TEST_CASE("no follow-up is started while the nodes to measure again are away") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  f.scheduler->unreachable.insert("d");
  const v1::Sweep s = f.Start();
  f.scheduler->nodes["d"].set_liveness(v1::NODE_LIVENESS_LOST);  // its lease ran out meanwhile
  const v1::Sweep done = f.RunToEnd(s.id());
  REQUIRE(done.state() == v1::SWEEP_STATE_FINISHED);
  CHECK(done.anomalous_nodes_size() == 0);
  CHECK(FollowUps(f, done.id()).empty());
}

TEST_CASE("a sweep that cannot reach a cordoned node is not a pass for it") {
  HealthConfig config;
  config.uncordon_after_passes = 1;
  Fixture f(config);
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  f.RunToEnd(f.Start().id(), {{"d", 0.2}});
  REQUIRE(f.scheduler->nodes["d"].admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  f.scheduler->unreachable.insert("d");
  const v1::Sweep unreached = f.RunToEnd(f.Start({"a", "b", "c", "d"}).id());
  CHECK(NotMeasuredIn(unreached, "d"));
  CHECK(f.cordon->uncordoned.empty());
  // Its follow-up reaches it, and it passes: that is its first pass.
  f.scheduler->unreachable.clear();
  const auto follow_ups = FollowUps(f, unreached.id());
  REQUIRE(follow_ups.size() == 1);
  f.RunToEnd(follow_ups[0].id());
  REQUIRE(f.cordon->uncordoned.size() == 1);
  CHECK(f.cordon->uncordoned[0].first == "d");
  CHECK(f.cordon->uncordoned[0].second == "health: passed 1 sweeps in a row");
}

TEST_CASE("a canary acknowledged late is not a failure: its result still counts") {
  Fixture f;
  for (const auto& n : {"a", "b", "c"}) f.scheduler->Add(n);
  f.scheduler->unacknowledged.insert("b");
  const v1::Sweep done = f.RunToEnd(f.Start().id());
  REQUIRE(done.state() == v1::SWEEP_STATE_FINISHED);
  CHECK(done.anomalous_nodes_size() == 0);
  CHECK(done.findings_size() == 0);
  CHECK(done.inconclusive_nodes_size() == 0);
  CHECK(f.cordon->cordoned.empty());
}

}  // namespace unreached_node_test
}  // namespace tessera::health
