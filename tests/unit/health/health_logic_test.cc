// The health API's pure logic: anomaly detection, sweep plans, the run watch, GPU fault policy.
#include <catch2/catch.hpp>
#include <set>

#include "healthcheck/anomaly.h"
#include "healthcheck/run_watch.h"
#include "healthcheck/sweep_plan.h"
#include "proto/policy/gpu_faults.h"
#include "tests/unit/health/confirmation_results.h"

namespace tessera::health {
namespace health_logic_test {

v1::HealthCheckResult Compute(const std::string& node, double tflops,
                              v1::HealthVerdict verdict = v1::HEALTH_VERDICT_PASSED) {
  return testing::Measured(node, tflops, /*step=*/0, verdict);
}

v1::HealthCheckResult Reduce(const std::string& node, const std::vector<std::string>& group,
                             double busbw, v1::HealthVerdict verdict = v1::HEALTH_VERDICT_PASSED) {
  v1::HealthCheckResult r;
  r.set_node_name(node);
  r.set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
  for (const auto& g : group) r.add_group(g);
  r.set_verdict(verdict);
  auto* s = r.add_samples();
  s->set_payload_bytes(64 << 20);
  s->set_busbw_gbps(busbw);
  return r;
}

std::vector<std::string> Nodes(int n) {
  std::vector<std::string> nodes;
  for (int i = 0; i < n; ++i) nodes.push_back("n" + std::to_string(i));
  return nodes;
}

// The rules one sweep's figures decide by alone (--confirm-suspects=false).
AnomalyConfig SingleSweep() {
  AnomalyConfig c;
  c.confirmation.enabled = false;
  return c;
}

TEST_CASE("median and MAD") {
  CHECK(Median({3, 1, 2}) == 2);
  CHECK(Median({4, 1, 2, 3}) == 2.5);
  CHECK(MedianAbsoluteDeviation({1, 2, 3, 4, 100}, 3) == 1);
}

TEST_CASE("on one sweep's figures a node 20% slow among 8 is found, healthy noise is not") {
  const auto nodes = Nodes(8);
  std::vector<v1::HealthCheckResult> results;
  const double rates[] = {1.00, 1.02, 0.98, 1.01, 0.80, 0.99, 1.03, 0.97};
  for (int i = 0; i < 8; ++i) results.push_back(Compute(nodes[static_cast<size_t>(i)], rates[i]));
  auto found = FindAnomalies(nodes, {}, results, SingleSweep());
  REQUIRE(found.size() == 1);
  CHECK(found[0].node == "n4");
  CHECK(found[0].verdict == v1::HEALTH_VERDICT_SLOW);
  CHECK(found[0].finding.find("n4: compute 0.8 TFLOP/s, 0.80 x the median") == 0);
  CHECK(found[0].evidence.at("peer_median_tflops") == Approx(0.995));
  // 8% below the median with the same spread: noise, not a bad node.
  results[4] = Compute("n4", 0.92);
  CHECK(FindAnomalies(nodes, {}, results, SingleSweep()).empty());
}

TEST_CASE("on one sweep's figures measured in turns, a node is also compared with its neighbours") {
  // Two passes over 6 nodes; the machine runs at 80% speed from the 3rd to the 8th measurement,
  // which holds both of n4's. n3 is really slow (80%).
  const auto nodes = Nodes(6);
  std::vector<v1::HealthCheckResult> results;
  const std::vector<int> order = {0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2};
  for (size_t i = 0; i < order.size(); ++i) {
    const bool dip = i >= 2 && i <= 7;
    const double speed = (dip ? 0.8 : 1.0) * (order[i] == 3 ? 0.8 : 1.0);
    auto r = Compute(nodes[static_cast<size_t>(order[i])], speed);
    r.mutable_finished_at()->set_seconds(static_cast<int64_t>(i));
    results.push_back(r);
  }
  // Against the median alone n4 (best 0.8) would be condemned too; beside its neighbours, which
  // the dip slowed as much, it is level.
  auto found = FindAnomalies(nodes, {}, results, SingleSweep());
  REQUIRE(found.size() == 1);
  CHECK(found[0].node == "n3");
  CHECK(found[0].finding.find("at best 0.80 x the nodes measured beside it") != std::string::npos);
  CHECK(found[0].evidence.at("fraction_of_neighbours") == Approx(0.8));
}

TEST_CASE(
    "on one sweep's figures with a wide spread a lower node is not condemned: the MAD guards") {
  const auto nodes = Nodes(6);
  std::vector<v1::HealthCheckResult> results;
  const double rates[] = {1.0, 0.7, 1.3, 0.8, 1.2, 0.75};
  for (int i = 0; i < 6; ++i) results.push_back(Compute(nodes[static_cast<size_t>(i)], rates[i]));
  CHECK(FindAnomalies(nodes, {}, results, SingleSweep()).empty());
}

TEST_CASE("on one sweep's figures with fewer than 4 nodes only half speed or worse is slow") {
  const auto nodes = Nodes(3);
  std::vector<v1::HealthCheckResult> results = {Compute("n0", 1.0), Compute("n1", 0.6),
                                                Compute("n2", 1.1)};
  CHECK(FindAnomalies(nodes, {}, results, SingleSweep()).empty());
  results[1] = Compute("n1", 0.3);
  auto found = FindAnomalies(nodes, {}, results, SingleSweep());
  REQUIRE(found.size() == 1);
  CHECK(found[0].node == "n1");
  // Two nodes: the slow one is below half the median (the mean of the two).
  auto two = FindAnomalies(Nodes(2), {}, {Compute("n0", 1.0), Compute("n1", 0.2)}, SingleSweep());
  REQUIRE(two.size() == 1);
  CHECK(two[0].node == "n1");
  // With confirmation (the default) none of it condemns: they are suspects, measured again.
  CHECK(FindAnomalies(nodes, {}, results, AnomalyConfig{}).empty());
}

TEST_CASE("failed, wrong and missing checks condemn their node") {
  const auto nodes = Nodes(3);
  auto found = FindAnomalies(
      nodes, {}, {Compute("n0", 1.0, v1::HEALTH_VERDICT_WRONG_DATA), Compute("n1", 1.0)},
      AnomalyConfig{});
  REQUIRE(found.size() == 2);
  CHECK(found[0].node == "n0");
  CHECK(found[0].verdict == v1::HEALTH_VERDICT_WRONG_DATA);
  CHECK(found[1].node == "n2");
  CHECK(found[1].verdict == v1::HEALTH_VERDICT_TIMEOUT);
  CHECK(found[1].finding == "n2: no compute stress result before the sweep's deadline");
}

TEST_CASE("an all-reduce failure is pinned on the node common to both failing pairs") {
  const auto nodes = Nodes(4);
  const auto groups = RingPairs(nodes);  // n0-n1, n1-n2, n2-n3, n3-n0
  std::vector<v1::HealthCheckResult> results;
  for (const auto& n : nodes) results.push_back(Compute(n, 1.0));
  for (const auto& g : groups) {
    const bool bad = g[0] == "n2" || g[1] == "n2";
    for (const auto& m : g) {
      results.push_back(Reduce(
          m, g, 5.0, bad && m == "n2" ? v1::HEALTH_VERDICT_TIMEOUT : v1::HEALTH_VERDICT_PASSED));
    }
  }
  auto found = FindAnomalies(nodes, groups, results, AnomalyConfig{});
  REQUIRE(found.size() == 1);
  CHECK(found[0].node == "n2");
  CHECK(found[0].verdict == v1::HEALTH_VERDICT_TIMEOUT);
  // A slow link likewise: both pairs of n1 at a fifth of the others' busbw (among 6 nodes: with
  // half the pairs slow there would be no telling which half is normal).
  const auto six = Nodes(6);
  const auto six_groups = RingPairs(six);
  results.clear();
  for (const auto& n : six) results.push_back(Compute(n, 1.0));
  for (const auto& g : six_groups) {
    const bool slow = g[0] == "n1" || g[1] == "n1";
    for (const auto& m : g) results.push_back(Reduce(m, g, slow ? 1.0 : 5.0));
  }
  found = FindAnomalies(six, six_groups, results, AnomalyConfig{});
  REQUIRE(found.size() == 1);
  CHECK(found[0].node == "n1");
  CHECK(found[0].finding.find("all-reduce with") != std::string::npos);
}

TEST_CASE("ring pairs, rounds without a node twice, compute rounds per machine") {
  CHECK(RingPairs({"a"}).empty());
  CHECK(RingPairs({"a", "b"}) == std::vector<std::vector<std::string>>{{"a", "b"}});
  const auto ring = RingPairs({"a", "b", "c", "d"});
  CHECK(ring.size() == 4);
  CHECK(Rounds(ring).size() == 2);
  CHECK(Rounds(RingPairs({"a", "b", "c"})).size() == 3);
  for (const auto& round : Rounds(RingPairs({"a", "b", "c", "d", "e", "f"}))) {
    std::set<std::string> seen;
    for (const auto& g : round) {
      for (const auto& m : g) CHECK(seen.insert(m).second);
    }
  }
  std::map<std::string, v1::Node> known;
  for (const auto& [name, addr] : std::vector<std::pair<std::string, std::string>>{
           {"a", "10.0.0.1"}, {"b", "10.0.0.2"}, {"c", "127.0.0.1"}, {"d", "127.0.0.1"}}) {
    known[name].set_name(name);
    known[name].set_address(addr);
  }
  const auto rounds = ComputeRounds({"a", "b", "c", "d"}, known);
  REQUIRE(rounds.size() == 2);
  CHECK(rounds[0] == std::vector<std::string>{"a", "b", "c"});
  CHECK(rounds[1] == std::vector<std::string>{"d"});
  CHECK(ExpectedResults({"a", "b", "c"}) == 3 + 6);
  CHECK(ExpectedResults({"a"}) == 1);
}

TEST_CASE("neighbour order follows switch, rack and name") {
  std::vector<v1::Node> nodes(3);
  nodes[0].set_name("z");
  (*nodes[0].mutable_labels())["rack"] = "r1";
  nodes[1].set_name("b");
  (*nodes[1].mutable_labels())["rack"] = "r2";
  nodes[2].set_name("a");
  (*nodes[2].mutable_labels())["rack"] = "r2";
  const auto ordered = NeighbourOrder(nodes);
  CHECK(ordered[0].name() == "z");
  CHECK(ordered[1].name() == "a");
  CHECK(ordered[2].name() == "b");
}

TEST_CASE("all-reduce dispatches: one per member, the group's first node is the master") {
  std::map<std::string, v1::Node> known;
  for (const auto& n : {"a", "b"}) {
    known[n].set_name(n);
    known[n].set_address(std::string(n) + ".local");
  }
  const auto d =
      AllReducePhase("sw-1", {{"a", "b"}}, known, RendezvousPorts{40000, 300, 0}, CanaryConfig{});
  REQUIRE(d.size() == 2);
  CHECK(d[1].node == "b");
  CHECK(d[1].canary.rank() == 1);
  CHECK(d[1].canary.master_addr() == "a.local");
  CHECK(d[1].canary.master_port() == 40000);
  CHECK(d[1].canary.payload_bytes_size() == 4);  // 1 to 64 MiB on CPUs
  CHECK(d[1].canary.payload_bytes(3) == 64 << 20);
  CHECK(d[0].canary.rendezvous_token().size() == 32);
  CHECK(d[1].canary.rendezvous_token() == d[0].canary.rendezvous_token());
}

TEST_CASE("each all-reduce group rendezvous under a token of its own, new every stage") {
  std::map<std::string, v1::Node> known;
  for (const auto& n : {"a", "b", "c", "d"}) known[n].set_name(n);
  const std::vector<std::vector<std::string>> groups = {{"a", "b"}, {"c", "d"}};
  const auto first = AllReducePhase("sw-1", groups, known, RendezvousPorts{40000, 300, 0}, {});
  REQUIRE(first.size() == 4);
  // One group's member cannot join the other's rendezvous: it never learns its token.
  CHECK(first[0].canary.rendezvous_token() == first[1].canary.rendezvous_token());
  CHECK(first[2].canary.rendezvous_token() == first[3].canary.rendezvous_token());
  CHECK(first[0].canary.rendezvous_token() != first[2].canary.rendezvous_token());
  const auto again = AllReducePhase("sw-1", groups, known, RendezvousPorts{40000, 300, 0}, {});
  CHECK(again[0].canary.rendezvous_token() != first[0].canary.rendezvous_token());
}

TEST_CASE("a stage's rendezvous ports stay in the range however many groups it has") {
  const RendezvousPorts ports{700, 300, 250};
  CHECK(ports.For(0) == 950);
  CHECK(ports.For(49) == 999);
  CHECK(ports.For(50) == 700);   // wrapped, not 1000
  CHECK(ports.For(649) == 999);  // 650 groups (1,300 nodes): none reaches 1024
  for (size_t g = 0; g < 5000; ++g) {
    const int port = ports.For(g);
    CHECK((port >= 700 && port <= 999));
  }
}

TEST_CASE("a rendezvous token is 128 bits in lowercase hex, new at every draw") {
  std::set<std::string> drawn;
  for (int i = 0; i < 1000; ++i) {
    const std::string token = RendezvousToken();
    CHECK(token.size() == 32);
    CHECK(token.find_first_not_of("0123456789abcdef") == std::string::npos);
    drawn.insert(token);
  }
  CHECK(drawn.size() == 1000);
}

v1::Run RunWith(double mfu, int64_t reported_seconds, int resumption = 0) {
  v1::Run r;
  r.set_id("run-1");
  r.set_name("gpt-1");
  r.set_resumption_index(resumption);
  r.mutable_spec()->mutable_scheduling()->set_mfu_threshold(0.05);
  r.mutable_progress()->set_mfu(mfu);
  r.mutable_progress()->mutable_reported_at()->set_seconds(reported_seconds);
  return r;
}

TEST_CASE("an MFU under the run's threshold for N new reports triggers a sweep, then rests") {
  RunWatch watch(RunWatchConfig{.mfu_reports = 3, .rearm_reports = 4});
  CHECK_FALSE(watch.Observe(RunWith(0.10, 1)));
  CHECK_FALSE(watch.Observe(RunWith(0.03, 2)));
  CHECK_FALSE(watch.Observe(RunWith(0.03, 2)));  // the same report again: not counted
  CHECK_FALSE(watch.Observe(RunWith(0.03, 3)));
  CHECK_FALSE(watch.Observe(RunWith(0.06, 4)));  // recovered: the count restarts
  CHECK_FALSE(watch.Observe(RunWith(0.03, 5)));
  CHECK_FALSE(watch.Observe(RunWith(0.03, 6)));
  auto t = watch.Observe(RunWith(0.03, 7));
  REQUIRE(t.has_value());
  CHECK(t->trigger == v1::SWEEP_TRIGGER_MFU_DROP);
  CHECK(t->run_name == "gpt-1");
  CHECK(t->reason == "MFU 3.00% under the run's threshold 5.00% for 3 reports");
  for (int report = 8; report <= 11; ++report) {  // resting
    CHECK_FALSE(watch.Observe(RunWith(0.03, report)));
  }
  CHECK_FALSE(watch.Observe(RunWith(0.03, 12)));
  CHECK_FALSE(watch.Observe(RunWith(0.03, 13)));
  CHECK(watch.Observe(RunWith(0.03, 14)).has_value());  // still slow: swept again
  CHECK_FALSE(watch.Observe(RunWith(0.03, 15, 1)));     // a new attempt starts over
  CHECK_FALSE(watch.Observe(RunWith(0.03, 16, 1)));
  CHECK(watch.Observe(RunWith(0.03, 17, 1)).has_value());
}

TEST_CASE("a node whose compute time per step stays far above its peers' is a straggler") {
  RunWatch watch(RunWatchConfig{.straggler_factor = 1.5, .straggler_reports = 2});
  auto run = RunWith(0.2, 1);
  auto& compute = *run.mutable_progress()->mutable_node_compute_seconds();
  compute["a"] = 0.10;
  compute["b"] = 0.11;
  compute["c"] = 0.30;
  CHECK_FALSE(watch.Observe(run));
  run.mutable_progress()->mutable_reported_at()->set_seconds(2);
  auto t = watch.Observe(run);
  REQUIRE(t.has_value());
  CHECK(t->trigger == v1::SWEEP_TRIGGER_STRAGGLER);
  CHECK(t->suspect_node == "c");
}

TEST_CASE("fatal GPU faults: memory, bus, NVLink and GSP errors, not application XIDs") {
  v1::GpuFault f;
  f.set_kind(v1::GPU_FAULT_KIND_XID);
  f.set_xid(79);
  CHECK(IsFatalGpuFault(f));
  f.set_xid(13);  // graphics engine exception: usually the program
  CHECK_FALSE(IsFatalGpuFault(f));
  f.set_kind(v1::GPU_FAULT_KIND_ECC_UNCORRECTABLE);
  CHECK(IsFatalGpuFault(f));
  f.set_kind(v1::GPU_FAULT_KIND_THERMAL_THROTTLE);
  CHECK_FALSE(IsFatalGpuFault(f));
}

}  // namespace health_logic_test
}  // namespace tessera::health
