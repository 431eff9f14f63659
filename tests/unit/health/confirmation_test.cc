// The confirmation of suspects: who is a suspect, the interleaved plan replayed from results
// (drift of the machine cancels, failures are clear faults, bounds give "inconclusive"), and
// suspects measured in turn beside their neighbours (follow-ups and verdicts are in
// confirmation_verdict_test.cc).
#include "healthcheck/confirmation.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "healthcheck/anomaly.h"
#include "healthcheck/sequential_test.h"
#include "tests/unit/health/confirmation_results.h"

namespace tessera::health {
namespace confirmation_test {
using testing::Measured;

TEST_CASE("suspects are below the screen, peers nearest the median first") {
  const std::vector<std::string> nodes = {"a", "b", "c", "d", "e", "f"};
  std::vector<v1::HealthCheckResult> results = {
      Measured("a", 1.00), Measured("b", 0.88), Measured("c", 1.05), Measured("d", 0.40),
      Measured("e", 0.99), Measured("f", 1.01),
      // a second pass: b's better figure still low; a later step's figures do not count
      Measured("b", 0.90), Measured("e", 0.50, 3), Measured("x", 0.1)};
  // The screen by the median alone (the one beside the neighbours is the cases below').
  ConfirmationConfig by_median;
  by_median.neighbour_suspects = 0;
  std::vector<std::string> peers;
  const auto suspects = FindSuspects(nodes, results, by_median, {"d"}, &peers);
  CHECK(suspects == std::vector<std::string>{"b"});              // d is excluded (condemned)
  CHECK(peers == std::vector<std::string>{"a", "e", "f", "c"});  // median 0.995
  CHECK(FindSuspects(nodes, results, by_median, {"b", "a", "d"}, &peers).empty());
  CHECK(peers == std::vector<std::string>{"e", "f", "c"});
  CHECK(FindSuspects({"a"}, results, by_median, {}, &peers).empty());
  // Not excluded, a node at 0.40 is a suspect like any other below the screen.
  CHECK(FindSuspects(nodes, results, by_median, {}, &peers) == std::vector<std::string>{"b", "d"});
}

// Runs the plan to its end, measuring each step's node at rate(node, step).
ConfirmationPlan Confirm(const std::vector<std::string>& suspects,
                         const std::vector<std::string>& peers,
                         const std::function<double(const std::string&, int)>& rate,
                         std::vector<std::string>* line = nullptr,
                         const ConfirmationConfig& config = {}) {
  std::vector<v1::HealthCheckResult> results;
  for (int guard = 0; guard < 1000; ++guard) {
    const ConfirmationPlan plan = PlanConfirmation(suspects, peers, results, config);
    if (plan.next_node.empty()) return plan;
    REQUIRE(plan.next_step == static_cast<int>(results.size()) + 1);
    REQUIRE(plan.steps_done == static_cast<int>(results.size()));
    if (line) line->push_back(plan.next_node);
    results.push_back(
        Measured(plan.next_node, rate(plan.next_node, plan.next_step), plan.next_step));
  }
  FAIL("the plan never ended");
  return {};
}

TEST_CASE("suspects are measured between peers until decided, the machine's drift cancels") {
  // The machine loses 5% of its speed per step (from 1.0 to about 0.3 by the end): a suspect at
  // 0.8 is still slow beside the peers measured just before and after it, one at 1.0 healthy.
  auto drift = [](int step) { return std::pow(0.95, step); };
  auto rate = [&](const std::string& node, int step) {
    return (node == "slow" ? 0.8 : 1.0) * drift(step);
  };
  std::vector<std::string> line;
  const auto plan = Confirm({"slow", "fine"}, {"p1", "p2"}, rate, &line);
  // peer, then each round: a suspect and a peer each, rotating the peers.
  REQUIRE(line.size() >= 5);
  CHECK(std::vector<std::string>(line.begin(), line.begin() + 5) ==
        std::vector<std::string>{"p1", "slow", "p2", "fine", "p1"});
  const auto& slow = plan.outcomes.at("slow");
  CHECK(slow.test.decision == SequentialDecision::kSlow);
  CHECK(slow.test.pairs == 6);  // min_pairs_slow
  CHECK(slow.test.mean_ratio == Approx(0.8 / ((1 / 0.95 + 0.95) / 2)).epsilon(1e-9));
  CHECK(slow.suspect_tflops.size() == 6);
  CHECK(slow.peer_tflops.size() == 6);
  CHECK(plan.outcomes.at("fine").test.decision == SequentialDecision::kHealthy);
  CHECK(plan.outcomes.at("fine").test.pairs == 4);  // cleared at min_pairs
  CHECK(plan.steps_done == static_cast<int>(line.size()));
  // Four rounds of two suspects, each with a peer, then two of "slow" alone.
  CHECK(line.size() == 1 + 4 * 4u + 2 * 2u);
}

TEST_CASE("a decided suspect leaves the line, the undecided ones go on") {
  // "close" alternates between 1.0 and 0.86: the test needs more pairs for it than for "slow".
  int close_measured = 0;
  auto rate = [&](const std::string& node, int) {
    if (node == "slow") return 0.7;
    if (node == "close") return close_measured++ % 2 == 0 ? 1.0 : 0.86;
    return 1.0;
  };
  std::vector<std::string> line;
  const auto plan = Confirm({"slow", "close"}, {"p"}, rate, &line);
  CHECK(plan.outcomes.at("slow").test.pairs == 6);
  CHECK(plan.outcomes.at("close").test.pairs > 6);
  CHECK(std::count(line.begin(), line.end(), "slow") == 6);
  CHECK(std::count(line.begin(), line.end(), "close") == plan.outcomes.at("close").test.pairs);
}

TEST_CASE("a measurement impossible on its face is measured again, not counted") {
  // The slow node's second re-measurement hardly ran (1.5% of its peers); the others are 0.8.
  int measured = 0;
  auto rate = [&](const std::string& node, int) {
    if (node != "slow") return 1.0;
    return ++measured == 2 ? 0.015 : 0.8;
  };
  std::vector<std::string> line;
  const auto plan = Confirm({"slow"}, {"p1", "p2"}, rate, &line);
  const auto& o = plan.outcomes.at("slow");
  CHECK(o.test.decision == SequentialDecision::kSlow);
  CHECK(o.test.set_aside == 1);
  CHECK(o.test.pairs == 6);  // min_pairs_slow counted, so one more measurement than pairs
  CHECK(std::count(line.begin(), line.end(), "slow") == 7);
  CHECK(o.suspect_tflops.size() == 7);  // every figure kept, for the sweep's record
  CHECK(o.test.mean_ratio == Approx(0.8));
  CHECK(DescribeOutcome("slow", o).find("over 6 pairs measured in turn with them, 1 set aside") !=
        std::string::npos);
}

TEST_CASE("a pair whose peers disagree is measured again, whatever the suspect's figure") {
  // The machine stalls while the peer after the suspect's fifth measurement runs (0.3 of its
  // speed): the two pairs that peer closes and opens disagree, and are not counted either way.
  int slow_measured = 0;
  int stalls = 0;
  auto rate = [&](const std::string& node, int) {
    if (node == "slow") {
      ++slow_measured;
      return 0.8;
    }
    if (slow_measured == 5 && stalls == 0) {
      ++stalls;
      return 0.3;
    }
    return 1.0;
  };
  std::vector<std::string> line;
  const auto plan = Confirm({"slow"}, {"p1", "p2"}, rate, &line);
  const auto& o = plan.outcomes.at("slow");
  CHECK(stalls == 1);
  CHECK(o.peers_disagreed == 2);
  CHECK(o.test.decision == SequentialDecision::kSlow);
  CHECK(o.test.pairs == 6);
  CHECK(o.test.mean_ratio == Approx(0.8));  // the stalled moments moved nothing
  CHECK(std::count(line.begin(), line.end(), "slow") == 8);
  CHECK(DescribeOutcome("slow", o).find("2 measured again (its peers disagreed)") !=
        std::string::npos);
  // Peers that disagree within the machine's noise count: 0.95 and 1.0 are a pair like others.
  int measured = 0;
  const auto level = Confirm({"s"}, {"p"}, [&](const std::string& node, int) {
    if (node == "s") return 0.8;
    return ++measured % 2 == 0 ? 0.98 : 1.0;
  });
  CHECK(level.outcomes.at("s").peers_disagreed == 0);
  // Bounded: a machine that stalls under every fifth peer measurement, with a suspect the test
  // cannot decide, has it measured again 4 times at most, then counts its pairs whatever they are.
  int peer_turn = 0, s_turn = 0;
  const auto stalling = Confirm({"s"}, {"p"}, [&](const std::string& node, int) {
    if (node == "s") return 0.922 * (s_turn++ % 2 == 0 ? 1.08 : 1 / 1.08);
    return ++peer_turn % 5 == 0 ? 0.3 : 1.0;
  });
  const auto& undecided = stalling.outcomes.at("s");
  CHECK(undecided.peers_disagreed == ConfirmationConfig{}.max_measured_again);
  CHECK(undecided.test.decision == SequentialDecision::kInconclusive);
  CHECK(s_turn == SequentialTestConfig{}.max_pairs + ConfirmationConfig{}.max_measured_again);
}

TEST_CASE("a suspect never decided within the bound is inconclusive, with its figures") {
  auto rate = [](const std::string& node, int step) {
    if (node != "s") return 1.0;
    return 0.922 * (step % 4 == 2 ? 1.08 : 1 / 1.08);  // s is measured at even steps
  };
  const auto plan = Confirm({"s"}, {"p1", "p2", "p3"}, rate);
  const auto& o = plan.outcomes.at("s");
  CHECK(o.test.decision == SequentialDecision::kInconclusive);
  CHECK(o.test.pairs == SequentialTestConfig{}.max_pairs);
  CHECK(plan.steps_done == 1 + 2 * SequentialTestConfig{}.max_pairs);
  CHECK_FALSE(ConfirmedAnomaly("s", o).has_value());  // not condemned
  CHECK(DescribeOutcome("s", o).find("s: inconclusive: 0.92") == 0);
  CHECK(DescribeOutcome("s", o).find("measured again in a follow-up sweep") != std::string::npos);
}

TEST_CASE("a suspect failing its re-measurement is a clear fault, a failed peer is left out") {
  std::vector<v1::HealthCheckResult> results = {
      Measured("p", 1.0, 1), Measured("s", 0.8, 2),
      Measured("q", 0, 3, v1::HEALTH_VERDICT_TIMEOUT),  // the peer after it: left out
      Measured("t", 0.0, 4, v1::HEALTH_VERDICT_WRONG_DATA), Measured("p", 1.0, 5)};
  results[2].set_error("no result before the sweep's deadline");
  results[3].set_error("checksum mismatch");
  const auto plan = PlanConfirmation({"s", "t"}, {"p", "q"}, results, ConfirmationConfig{});
  const auto& s = plan.outcomes.at("s");
  REQUIRE(s.suspect_tflops.size() == 1);
  CHECK(s.peer_tflops[0] == 1.0);  // the one usable peer
  const auto& t = plan.outcomes.at("t");
  CHECK(t.fault == v1::HEALTH_VERDICT_WRONG_DATA);
  auto a = ConfirmedAnomaly("t", t);
  REQUIRE(a.has_value());
  CHECK(a->verdict == v1::HEALTH_VERDICT_WRONG_DATA);
  CHECK(a->finding ==
        "t: compute stress HEALTH_VERDICT_WRONG_DATA when measured again: "
        "checksum mismatch");
  // The next round measures s only.
  CHECK(plan.next_step == 6);
  CHECK(plan.next_node == "s");
  // The peer that timed out is a clear fault too, and out of the rotation: the peer after s is p
  // again, not q's turn.
  REQUIRE(plan.failed_peers.count("q") == 1);
  CHECK(plan.failed_peers.at("q").first == v1::HEALTH_VERDICT_TIMEOUT);
  results.push_back(Measured("s", 0.8, 6));
  CHECK(PlanConfirmation({"s", "t"}, {"p", "q"}, results, ConfirmationConfig{}).next_node == "p");
  const ConfirmationVerdicts verdicts = JudgeConfirmation(plan, nullptr, ConfirmationConfig{});
  const auto q = std::find_if(verdicts.anomalies.begin(), verdicts.anomalies.end(),
                              [](const Anomaly& x) { return x.node == "q"; });
  REQUIRE(q != verdicts.anomalies.end());
  CHECK(q->verdict == v1::HEALTH_VERDICT_TIMEOUT);
  CHECK(q->finding ==
        "q: compute stress HEALTH_VERDICT_TIMEOUT when measured as a peer of the suspects: no "
        "result before the sweep's deadline");
}

TEST_CASE("a peer that hangs costs the confirmation one step, with none left it ends") {
  // q hangs after the sweep's first figures: each of its measurements would wait for the
  // step's deadline. It is measured once, then the suspects go on beside p alone.
  std::vector<v1::HealthCheckResult> results;
  std::vector<std::string> line;
  ConfirmationPlan plan;
  for (int guard = 0; guard < 1000; ++guard) {
    plan = PlanConfirmation({"slow", "fine"}, {"q", "p"}, results, ConfirmationConfig{});
    if (plan.next_node.empty()) break;
    line.push_back(plan.next_node);
    const bool hung = plan.next_node == "q" && plan.next_step > 1;
    results.push_back(Measured(plan.next_node, plan.next_node == "slow" ? 0.75 : 1.0,
                               plan.next_step,
                               hung ? v1::HEALTH_VERDICT_TIMEOUT : v1::HEALTH_VERDICT_PASSED));
  }
  REQUIRE(plan.next_node.empty());
  CHECK(std::count(line.begin(), line.end(), "q") == 2);  // the first step, then its timeout
  CHECK(plan.outcomes.at("slow").test.decision == SequentialDecision::kSlow);
  CHECK(plan.outcomes.at("fine").test.decision == SequentialDecision::kHealthy);
  CHECK(plan.failed_peers.count("q") == 1);
  CHECK(plan.failed_peers.count("p") == 0);

  // Every peer failed: the suspects still undecided are inconclusive, the plan ends at once.
  const std::vector<v1::HealthCheckResult> all_failed = {
      Measured("q", 1.0, 1), Measured("slow", 0.75, 2),
      Measured("q", 0, 3, v1::HEALTH_VERDICT_ERROR)};
  plan = PlanConfirmation({"slow", "fine"}, {"q"}, all_failed, ConfirmationConfig{});
  CHECK(plan.next_node.empty());
  CHECK(plan.outcomes.at("slow").test.decision == SequentialDecision::kInconclusive);
  CHECK(plan.outcomes.at("fine").test.decision == SequentialDecision::kInconclusive);
  CHECK(plan.failed_peers.at("q").first == v1::HEALTH_VERDICT_ERROR);
  CHECK(plan.failed_peers.at("q").second == "no compute figure");
}

TEST_CASE("a slow verdict keeps every pair and the test's figures as evidence") {
  auto rate = [](const std::string& node, int) { return node == "s" ? 0.75 : 1.0; };
  const auto plan = Confirm({"s"}, {"p"}, rate);
  auto a = ConfirmedAnomaly("s", plan.outcomes.at("s"));
  REQUIRE(a.has_value());
  CHECK(a->verdict == v1::HEALTH_VERDICT_SLOW);
  CHECK(a->finding.find(
            "s: slow: 0.750 x its peers' compute rate over 6 pairs measured in turn with them") ==
        0);
  CHECK(a->evidence.at("confirm_pairs") == 6);
  CHECK(a->evidence.at("confirm_mean_ratio") == Approx(0.75));
  CHECK(a->evidence.at("confirm_llr") > a->evidence.at("confirm_llr_slow_bound"));
  for (int i = 1; i <= 6; ++i) {
    CHECK(a->evidence.at("confirm_" + std::to_string(i) + "_tflops") == 0.75);
    CHECK(a->evidence.at("confirm_" + std::to_string(i) + "_peer_tflops") == 1.0);
  }
}

TEST_CASE("without peers suspects are inconclusive, without suspects there is nothing to do") {
  auto plan = PlanConfirmation({"s"}, {}, {}, ConfirmationConfig{});
  CHECK(plan.next_node.empty());
  CHECK(plan.outcomes.at("s").test.decision == SequentialDecision::kInconclusive);
  plan = PlanConfirmation({}, {"p"}, {}, ConfirmationConfig{});
  CHECK(plan.next_node.empty());
  CHECK(plan.outcomes.empty());
}

TEST_CASE("with confirmation on, first figures condemn no node for speed: all are suspects") {
  std::vector<std::string> nodes;
  std::vector<v1::HealthCheckResult> results;
  const double rates[] = {1.00, 1.02, 0.98, 1.01, 0.80, 0.99, 1.03, 0.45};
  for (int i = 0; i < 8; ++i) {
    nodes.push_back("n" + std::to_string(i));
    results.push_back(Measured(nodes.back(), rates[i]));
  }
  CHECK(FindAnomalies(nodes, {}, results, AnomalyConfig{}).empty());
  std::vector<std::string> peers;
  CHECK(FindSuspects(nodes, results, ConfirmationConfig{}, {}, &peers) ==
        std::vector<std::string>{"n4", "n7"});
  CHECK(peers.size() == 6);
  // Without confirmation one sweep's figures decide: both are condemned at once.
  AnomalyConfig alone;
  alone.confirmation.enabled = false;
  const auto found = FindAnomalies(nodes, {}, results, alone);
  REQUIRE(found.size() == 2);
  CHECK(found[0].node == "n4");
  CHECK(found[1].node == "n7");
  CHECK(found[1].finding.find("n7: compute 0.45 TFLOP/s, 0.45 x the median") == 0);
  // A check that failed outright is a clear fault either way.
  results[2].set_verdict(v1::HEALTH_VERDICT_WRONG_DATA);
  const auto wrong = FindAnomalies(nodes, {}, results, AnomalyConfig{});
  REQUIRE(wrong.size() == 1);
  CHECK(wrong[0].node == "n2");
  CHECK(wrong[0].verdict == v1::HEALTH_VERDICT_WRONG_DATA);
}

// First (step 0) measurements taken one after another, a second apart, in this order.
std::vector<v1::HealthCheckResult> InTurn(
    const std::vector<std::pair<std::string, double>>& figures) {
  std::vector<v1::HealthCheckResult> results;
  for (size_t i = 0; i < figures.size(); ++i) {
    results.push_back(Measured(figures[i].first, figures[i].second));
    results.back().mutable_finished_at()->set_seconds(static_cast<int64_t>(100 + i));
  }
  return results;
}

TEST_CASE("measured in turn, a node slow beside its neighbours is a suspect at the median") {
  // s runs at 0.8 of the others, but the machine was fast (1.25) just around both of its
  // measurements: its figures equal the median, yet it is 0.89 x the nodes measured beside it.
  const std::vector<std::string> nodes = {"a", "b", "c", "d", "e", "f", "s"};
  const auto results = InTurn({{"a", 1.0},
                               {"e", 1.0},
                               {"b", 1.25},
                               {"s", 1.0},
                               {"c", 1.25},
                               {"d", 1.0},
                               {"f", 1.0},
                               {"a", 1.0},
                               {"f", 1.0},
                               {"b", 1.25},
                               {"s", 1.0},
                               {"c", 1.25},
                               {"e", 1.0},
                               {"d", 1.0}});
  CHECK(BestFirstMeasurements(nodes, results).at("s") == 1.0);  // the median: no screen by it
  const auto beside = NeighbourRatios(results, nodes);
  REQUIRE(beside.at("s").size() == 2);
  CHECK(beside.at("s")[0] == Approx(1.0 / 1.125));  // median of 1.25, 1.0, 1.25, 1.0
  // A screen fixed at 0.92 (not following the noise): s alone.
  ConfirmationConfig fixed;
  fixed.screen_noise_sigmas = 0;
  std::vector<std::string> peers;
  CHECK(FindSuspects(nodes, results, fixed, {}, &peers) == std::vector<std::string>{"s"});
  CHECK(peers.size() == 6);
  // Only the lowest few beside their neighbours: of a, d and f (0.94), one joins s at a 0.95
  // screen with two such suspects a sweep, the others stay peers; with one, s alone.
  fixed.suspect_fraction = 0.95;
  fixed.neighbour_suspects = 2;
  const auto two = FindSuspects(nodes, results, fixed, {}, &peers);
  REQUIRE(two.size() == 2);
  CHECK(std::count(two.begin(), two.end(), "s") == 1);
  CHECK(peers.size() == 5);
  fixed.neighbour_suspects = 1;
  CHECK(FindSuspects(nodes, results, fixed, {}, &peers) == std::vector<std::string>{"s"});
  // The machine swung by 25% in this sweep: the screen follows its noise, and the three lowest
  // beside their neighbours (s, and two of a, d and f) are measured again.
  const auto noisy = FindSuspects(nodes, results, ConfirmationConfig{}, {}, &peers);
  REQUIRE(noisy.size() == 3);
  CHECK(std::count(noisy.begin(), noisy.end(), "s") == 1);
  CHECK(peers.size() == 4);
  // Measured once each, at the same time (nodes of their own): no neighbours, no such screen.
  CHECK(NeighbourRatios({Measured("a", 1.0), Measured("b", 0.5)}, {"a", "b"}).empty());
}

TEST_CASE("the screen beside the neighbours follows the sweep's noise") {
  const ConfirmationConfig config;
  CHECK(NeighbourScreen(config, 0) == config.suspect_fraction);
  CHECK(NeighbourScreen(config, 0.02) == config.suspect_fraction);  // a quiet sweep
  CHECK(NeighbourScreen(config, 0.1) == Approx(config.test.slow_ratio * std::exp(0.2)));
  // Eight nodes measured twice in turn, the second pass starting halfway, as a sweep does; s runs
  // at `speed` of the others, and each measurement at the machine's speed of its moment.
  const std::vector<std::string> nodes = {"a", "b", "c", "d", "s", "e", "f", "g"};
  auto sweep = [&](double speed, const std::vector<double>& moments) {
    std::vector<std::pair<std::string, double>> first;
    for (size_t pass = 0; pass < 2; ++pass) {
      for (size_t i = 0; i < nodes.size(); ++i) {
        const size_t n = pass == 0 ? i : (i + nodes.size() / 2) % nodes.size();
        first.push_back({nodes[n], (nodes[n] == "s" ? speed : 1.0) *
                                       moments[(pass * nodes.size() + i) % moments.size()]});
      }
    }
    return InTurn(first);
  };
  std::vector<std::string> peers;
  // Quiet (the machine within 1%), s at 0.94: the noise keeps the screen at 0.92, no suspect.
  const auto quiet = sweep(0.94, {1.0, 1.01, 0.99, 1.0, 1.005, 0.995});
  CHECK(SweepNoiseSigma({}, nodes, quiet) < 0.02);
  CHECK(FindSuspects(nodes, quiet, config, {}, &peers).empty());
  // Loaded: s runs at 0.8, but both its measurements fell in moments 18% fast while others fell
  // in slow ones, so it is 0.944 of the median and 0.944 of the nodes beside it (sweep 44 of
  // bench_health's run 11 had 0.92 and 0.94). A screen fixed at 0.92 hides it; the sweep's
  // noise (sigma about 0.06) raises the screen, and s, second lowest beside its neighbours, is
  // measured again.
  const auto loaded = sweep(
      0.8, {0.88, 1.0, 1.0, 1.0, 1.18, 1.0, 1.0, 1.0, 1.18, 1.0, 1.0, 0.85, 1.0, 0.88, 1.0, 0.87});
  CHECK(SweepNoiseSigma({}, nodes, loaded) > 0.05);
  ConfirmationConfig fixed = config;
  fixed.screen_noise_sigmas = 0;
  CHECK(FindSuspects(nodes, loaded, fixed, {}, &peers).empty());
  const auto suspects = FindSuspects(nodes, loaded, config, {}, &peers);
  CHECK(suspects.size() == static_cast<size_t>(config.neighbour_suspects));
  CHECK(std::count(suspects.begin(), suspects.end(), "s") == 1);
  // Three nodes, one at 0.3 (its neighbours' ratios swing wildly beside it): it is the suspect,
  // the noise is the others', and the two others stay peers to measure it beside.
  const std::vector<std::string> three = {"a", "b", "c"};
  const auto one_slow =
      InTurn({{"a", 1.0}, {"b", 0.3}, {"c", 1.1}, {"b", 0.3}, {"a", 0.9}, {"c", 1.0}});
  CHECK(FindSuspects(three, one_slow, config, {}, &peers) == std::vector<std::string>{"b"});
  CHECK(peers.size() == 2);
  // None under the median's screen, the machine noisy: one of three at most is a suspect.
  const auto noisy =
      InTurn({{"a", 1.0}, {"b", 0.93}, {"c", 1.2}, {"b", 1.0}, {"a", 0.8}, {"c", 1.0}});
  CHECK(FindSuspects(three, noisy, config, {}, &peers).size() <= 1);
  CHECK(peers.size() >= 2);
}

TEST_CASE("measured in turn, under half the median is a suspect, condemned alone only beside") {
  const std::vector<std::string> nodes = {"a", "b", "c", "d", "e", "f", "g", "h"};
  AnomalyConfig alone;  // one sweep's figures decide
  alone.confirmation.enabled = false;
  // h's two measurements, and those of c and d beside it, fell in moments when the machine ran
  // at 0.4: all three are under half the median (1.0), but not under half of their neighbours.
  auto results = InTurn({{"a", 1.0},
                         {"b", 1.0},
                         {"c", 0.4},
                         {"h", 0.4},
                         {"d", 0.4},
                         {"e", 1.0},
                         {"f", 1.0},
                         {"g", 1.0},
                         {"e", 1.0},
                         {"f", 1.0},
                         {"c", 0.4},
                         {"h", 0.4},
                         {"d", 0.4},
                         {"a", 1.0},
                         {"b", 1.0},
                         {"g", 1.0}});
  CHECK(FindAnomalies(nodes, {}, results, AnomalyConfig{}).empty());
  std::vector<std::string> peers;
  CHECK(FindSuspects(nodes, results, ConfirmationConfig{}, {}, &peers) ==
        std::vector<std::string>{"c", "d", "h"});
  // h at 0.4 beside nodes at 1.0: a suspect with confirmation on; without it, condemned at once,
  // with how it compares to them.
  results = InTurn({{"a", 1.0},
                    {"b", 1.0},
                    {"c", 1.0},
                    {"h", 0.4},
                    {"d", 1.0},
                    {"e", 1.0},
                    {"f", 1.0},
                    {"g", 1.0},
                    {"e", 1.0},
                    {"f", 1.0},
                    {"c", 1.0},
                    {"h", 0.4},
                    {"d", 1.0},
                    {"a", 1.0},
                    {"b", 1.0},
                    {"g", 1.0}});
  CHECK(FindAnomalies(nodes, {}, results, AnomalyConfig{}).empty());
  CHECK(FindSuspects(nodes, results, ConfirmationConfig{}, {}, &peers) ==
        std::vector<std::string>{"h"});
  const auto found = FindAnomalies(nodes, {}, results, alone);
  REQUIRE(found.size() == 1);
  CHECK(found[0].node == "h");
  CHECK(found[0].evidence.at("fraction_of_neighbours") == Approx(0.4));
  CHECK(found[0].finding.find("and at best 0.40 x the nodes measured beside it") !=
        std::string::npos);
}

TEST_CASE("the test's sigma is pooled with the machine's noise in the sweep's first measurements") {
  // Peers whose first figures swing by about +-20% beside each other.
  const double swing[] = {1.0, 1.2, 0.85, 1.1, 0.9, 1.25, 0.8, 1.0, 1.15, 0.95, 1.2, 0.85};
  const std::vector<std::string> peers = {"p1", "p2", "p3"};
  std::vector<std::pair<std::string, double>> first;
  for (int i = 0; i < 12; ++i) first.push_back({peers[static_cast<size_t>(i % 3)], swing[i]});
  auto results = InTurn(first);
  std::vector<double> logs;
  for (const auto& [node, ratios] : NeighbourRatios(results, peers)) {
    for (double r : ratios) logs.push_back(std::log(r));
  }
  const double expected = 1.4826 * MedianAbsoluteDeviation(logs, Median(logs));
  CHECK(SweepNoiseSigma({}, peers, results) == Approx(expected));
  CHECK(expected > 0.1);
  // Four pairs at 0.85 with a sd of 0.02 would be decisive under their own sigma; pooled with the
  // sweep's noise (weighing as 4 pairs) they are not yet.
  const double ratios[] = {0.83, 0.87, 0.85, 0.86};
  for (int k = 0; k < 4; ++k) {  // the plan's line: p1, s, p2, s, p3, s, p1, s, p2
    results.push_back(Measured(peers[static_cast<size_t>(k % 3)], 1.0, 2 * k + 1));
    results.push_back(Measured("s", ratios[k], 2 * k + 2));
  }
  results.push_back(Measured("p2", 1.0, 9));
  SequentialTestConfig from_four;
  from_four.min_pairs_slow = 4;
  CHECK(DecideSequentially({0.83, 0.87, 0.85, 0.86}, from_four).decision ==
        SequentialDecision::kSlow);
  ConfirmationConfig confirm_from_four;  // so that only the pooled sigma holds it back
  confirm_from_four.test = from_four;
  const auto plan = PlanConfirmation({"s"}, peers, results, confirm_from_four);
  CHECK(plan.noise_sigma == Approx(expected));
  const auto& s = plan.outcomes.at("s");
  CHECK(s.test.pairs == 4);
  double mean = 0, squares = 0;
  for (double r : ratios) mean += std::log(r) / 4;
  for (double r : ratios) squares += (std::log(r) - mean) * (std::log(r) - mean);
  CHECK(s.test.sigma == Approx(std::sqrt((squares + 4 * expected * expected) / (3 + 4))));
  CHECK(s.test.decision == SequentialDecision::kContinue);
  // Sixteen such pairs speak for themselves: the prior weighs as four of twenty.
  SequentialTestConfig pooled;
  pooled.prior_sigma = expected;
  std::vector<double> many;
  for (int i = 0; i < 4; ++i) many.insert(many.end(), std::begin(ratios), std::end(ratios));
  const auto sixteen = DecideSequentially(many, pooled);
  CHECK(sixteen.sigma < expected / 2);
  CHECK(sixteen.decision == SequentialDecision::kSlow);
}

}  // namespace confirmation_test
}  // namespace tessera::health
