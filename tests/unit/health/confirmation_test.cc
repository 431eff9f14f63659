// The confirmation of suspects: the interleaved plan replayed from results (drift of the
// machine cancels, failures are clear faults, bounds give "inconclusive"). Who is a suspect is
// suspect_screen_test.cc; follow-ups and verdicts are confirmation_verdict_test.cc.
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
using testing::InTurn;
using testing::Measured;

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
