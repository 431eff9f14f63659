// What a finished sweep does with its suspects (JudgeConfirmation), and the follow-up sweep
// that carries on with the pairs of those it left inconclusive.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "healthcheck/anomaly.h"
#include "healthcheck/confirmation.h"
#include "healthcheck/sequential_test.h"
#include "tests/unit/health/confirmation_results.h"

namespace tessera::health {
namespace confirmation_verdict_test {
using testing::Measured;

TEST_CASE("a follow-up carries on with the pairs of what the sweep before left inconclusive") {
  // The sweep before: s halfway between healthy and slow over 16 pairs, t cleared.
  ConfirmationPlan earlier;
  SuspectOutcome& s = earlier.outcomes["s"];
  for (int i = 0; i < 16; ++i) {
    s.suspect_tflops.push_back(0.922 * (i % 2 == 0 ? 1.08 : 1 / 1.08));
    s.peer_tflops.push_back(1.0);
  }
  s.test.decision = SequentialDecision::kInconclusive;
  earlier.outcomes["t"].test.decision = SequentialDecision::kHealthy;
  // This sweep: s looks level with its peers at first (not a suspect by its figures), u does not.
  std::vector<std::string> suspects = {"u"}, peers = {"p1", "s", "t", "p2"};
  std::map<std::string, SuspectOutcome> carried;
  CarryUndecided(earlier, ConfirmationConfig{}, &suspects, &peers, &carried);
  CHECK(suspects == std::vector<std::string>{"u", "s"});
  CHECK(peers == std::vector<std::string>{"p1", "t", "p2"});
  REQUIRE(carried.size() == 1);
  CHECK(carried.at("s").suspect_tflops.size() == 16);

  // Measured at 0.75 now, s is found slow on all its pairs, the 16 before counted too.
  std::vector<v1::HealthCheckResult> results;
  ConfirmationPlan plan;
  for (int guard = 0; guard < 200; ++guard) {
    plan = PlanConfirmation(suspects, peers, results, ConfirmationConfig{}, carried);
    if (plan.next_node.empty()) break;
    const double rate = plan.next_node == "s" ? 0.75 : 1.0;
    results.push_back(Measured(plan.next_node, rate, plan.next_step));
  }
  REQUIRE(plan.next_node.empty());
  const auto& o = plan.outcomes.at("s");
  CHECK(o.test.decision == SequentialDecision::kSlow);
  CHECK(o.test.pairs > 16);
  CHECK(o.suspect_tflops.size() == static_cast<size_t>(o.test.pairs));
  const auto a = ConfirmedAnomaly("s", o);
  REQUIRE(a.has_value());
  CHECK(a->evidence.at("confirm_1_tflops") == Approx(0.922 * 1.08));  // from the sweep before
  CHECK(a->evidence.at("confirm_17_tflops") == 0.75);                 // from this one
  CHECK(plan.outcomes.at("u").test.decision == SequentialDecision::kHealthy);

  // Still halfway: up to 16 more pairs here (32 in all), then inconclusive again.
  results.clear();
  int s_measured = 0;
  for (int guard = 0; guard < 200; ++guard) {
    plan = PlanConfirmation({"s"}, peers, results, ConfirmationConfig{}, carried);
    if (plan.next_node.empty()) break;
    const double rate =
        plan.next_node == "s" ? 0.922 * (s_measured++ % 2 == 0 ? 1.08 : 1 / 1.08) : 1.0;
    results.push_back(Measured(plan.next_node, rate, plan.next_step));
  }
  CHECK(plan.outcomes.at("s").test.decision == SequentialDecision::kInconclusive);
  CHECK(plan.outcomes.at("s").test.pairs == 32);
  CHECK(s_measured == 16);
}

// A suspect's outcome as a plan holds it: `decision` at `ratio` over `pairs` pairs.
SuspectOutcome Outcome(SequentialDecision decision, double ratio, int pairs = 6) {
  SuspectOutcome o;
  o.test.decision = decision;
  o.test.mean_ratio = ratio;
  o.test.pairs = pairs;
  o.test.llr = decision == SequentialDecision::kSlow ? 9.0 : 0.0;
  for (int i = 0; i < pairs; ++i) {
    o.suspect_tflops.push_back(ratio);
    o.peer_tflops.push_back(1.0);
  }
  return o;
}

TEST_CASE("a node found slow for speed alone is measured again afresh, never on carried pairs") {
  const ConfirmationConfig config;  // repeat above 0.5
  ConfirmationPlan earlier;
  earlier.outcomes["s"] = Outcome(SequentialDecision::kSlow, 0.8);
  earlier.outcomes["g"] = Outcome(SequentialDecision::kSlow, 0.3);  // gross: condemned then
  earlier.outcomes["i"] = Outcome(SequentialDecision::kInconclusive, 0.92, 16);
  CHECK(NeedsRepeat(earlier.outcomes["s"], config));
  CHECK_FALSE(NeedsRepeat(earlier.outcomes["g"], config));
  SuspectOutcome fault = Outcome(SequentialDecision::kSlow, 0.8);
  fault.fault = v1::HEALTH_VERDICT_ERROR;
  CHECK_FALSE(NeedsRepeat(fault, config));
  std::vector<std::string> suspects, peers = {"p1", "s", "g", "i", "p2"};
  std::map<std::string, SuspectOutcome> carried;
  CarryUndecided(earlier, config, &suspects, &peers, &carried);
  CHECK(suspects == std::vector<std::string>{"i", "s"});  // in the plan's (name) order
  CHECK(peers == std::vector<std::string>{"p1", "g", "p2"});
  REQUIRE(carried.size() == 2);  // the inconclusive one's pairs; s's outcome, to start afresh
  CHECK(carried.count("i") == 1);
  CHECK(carried.count("s") == 1);

  // Measured at 0.8 again, s is decided on this sweep's pairs alone.
  std::vector<v1::HealthCheckResult> results;
  ConfirmationPlan plan;
  for (int guard = 0; guard < 200; ++guard) {
    plan = PlanConfirmation({"s"}, peers, results, config, carried);
    if (plan.next_node.empty()) break;
    results.push_back(Measured(plan.next_node, plan.next_node == "s" ? 0.8 : 1.0, plan.next_step));
  }
  const auto& o = plan.outcomes.at("s");
  CHECK(o.test.decision == SequentialDecision::kSlow);
  CHECK(o.test.pairs == config.test.min_pairs_slow);
  CHECK(o.suspect_tflops.size() == static_cast<size_t>(o.test.pairs));

  // Level with its peers but for a noisy spread that never lets the test decide, a repeat may
  // take twice the pairs of a first test before it is left inconclusive.
  const auto undecided = [&](const std::map<std::string, SuspectOutcome>& with) {
    std::vector<v1::HealthCheckResult> measured;
    ConfirmationPlan p;
    for (int guard = 0; guard < 400; ++guard) {
      p = PlanConfirmation({"s"}, peers, measured, config, with);
      if (p.next_node.empty()) break;
      // s alternates between far above and far below its peers (steps 2, 6, ... and 4, 8, ...),
      // its log ratios centred between the hypotheses (1 and 0.85): the evidence stays even.
      const double high = 1.3, low = 0.85 / high;
      const double rate = p.next_node != "s" ? 1.0 : p.next_step % 4 == 2 ? high : low;
      measured.push_back(Measured(p.next_node, rate, p.next_step));
    }
    return p.outcomes.at("s").test;
  };
  const SequentialOutcome first = undecided({});
  const SequentialOutcome repeat = undecided(carried);
  CHECK(first.decision == SequentialDecision::kInconclusive);
  CHECK(first.pairs == config.test.max_pairs);
  CHECK(repeat.decision == SequentialDecision::kInconclusive);
  CHECK(repeat.pairs == kRepeatPairsFactor * config.test.max_pairs);
}

TEST_CASE("a repeat clears a node found slow on no fewer pairs than found it slow") {
  const ConfirmationConfig config;  // 4 pairs clear a first suspect, 6 condemn it
  // The follow-up's pairs of s: 1.05 for its first `lucky` measurements (a loaded machine's
  // burst beside its peers), then `after`.
  const auto follow_up = [&](const std::map<std::string, SuspectOutcome>& carried, int lucky,
                             double after) {
    std::vector<v1::HealthCheckResult> results;
    ConfirmationPlan plan;
    int s_measured = 0;
    for (int guard = 0; guard < 400; ++guard) {
      plan = PlanConfirmation({"s"}, {"p1", "p2"}, results, config, carried);
      if (plan.next_node.empty()) break;
      const double rate = plan.next_node != "s" ? 1.0 : s_measured++ < lucky ? 1.05 : after;
      results.push_back(Measured(plan.next_node, rate, plan.next_step));
    }
    return plan.outcomes.at("s").test;
  };
  // A first suspect is cleared on 4 such pairs.
  const SequentialOutcome first = follow_up({}, 4, 0.8);
  CHECK(first.decision == SequentialDecision::kHealthy);
  CHECK(first.pairs == 4);
  // Repeating a slow verdict of 6 pairs, they are not enough: the pairs after them, at the
  // node's real 0.8, condemn it.
  const std::map<std::string, SuspectOutcome> slow_on_six = {
      {"s", Outcome(SequentialDecision::kSlow, 0.84, 6)}};
  const SequentialOutcome repeat = follow_up(slow_on_six, 4, 0.8);
  CHECK(repeat.decision == SequentialDecision::kSlow);
  CHECK(repeat.pairs > 6);
  // Level with its peers all along, it is cleared on 6 pairs, or on 10 after a verdict of 10.
  CHECK(follow_up(slow_on_six, 100, 1.05).pairs == 6);
  CHECK(follow_up(slow_on_six, 100, 1.05).decision == SequentialDecision::kHealthy);
  const SequentialOutcome after_ten =
      follow_up({{"s", Outcome(SequentialDecision::kSlow, 0.84, 10)}}, 100, 1.05);
  CHECK(after_ten.decision == SequentialDecision::kHealthy);
  CHECK(after_ten.pairs == 10);
}

TEST_CASE("a sweep's verdicts: slowness alone is condemned only when a follow-up finds it too") {
  const ConfirmationConfig config;
  ConfirmationPlan plan;
  plan.outcomes["clear"] = Outcome(SequentialDecision::kHealthy, 1.0, 4);
  plan.outcomes["gross"] = Outcome(SequentialDecision::kSlow, 0.3);
  plan.outcomes["odd"] = Outcome(SequentialDecision::kInconclusive, 0.92, 16);
  plan.outcomes["slow"] = Outcome(SequentialDecision::kSlow, 0.8);
  plan.outcomes["broken"] = Outcome(SequentialDecision::kContinue, 1.0, 2);
  plan.outcomes["broken"].fault = v1::HEALTH_VERDICT_WRONG_DATA;
  plan.outcomes["broken"].fault_detail = "checksum mismatch";
  const auto names = [](const std::vector<Anomaly>& anomalies) {
    std::vector<std::string> out;
    for (const auto& a : anomalies) out.push_back(a.node);
    return out;
  };

  SECTION("a first sweep: clear faults and gross slowness at once, slowness alone repeated") {
    const ConfirmationVerdicts v = JudgeConfirmation(plan, nullptr, config);
    CHECK(names(v.anomalies) == std::vector<std::string>{"broken", "gross"});
    CHECK(v.anomalies[0].verdict == v1::HEALTH_VERDICT_WRONG_DATA);
    CHECK(v.anomalies[1].verdict == v1::HEALTH_VERDICT_SLOW);
    CHECK(v.repeat == std::vector<std::string>{"slow"});
    CHECK(v.inconclusive == std::vector<std::string>{"odd"});
  }
  SECTION("a follow-up of a sweep that found it slow too: condemned, with both sweeps' figures") {
    ConfirmationPlan earlier;
    earlier.outcomes["slow"] = Outcome(SequentialDecision::kSlow, 0.78, 7);
    const ConfirmationVerdicts v = JudgeConfirmation(plan, &earlier, config);
    REQUIRE(names(v.anomalies) == std::vector<std::string>{"broken", "gross", "slow"});
    const Anomaly& a = v.anomalies[2];
    CHECK(a.verdict == v1::HEALTH_VERDICT_SLOW);
    CHECK_THAT(a.finding,
               Catch::StartsWith("slow: slow: 0.800 x its peers' compute rate over 6 pairs"));
    CHECK_THAT(a.finding, Catch::EndsWith("slow in the sweep before too, measured apart: 0.780 x "
                                          "its peers over 7 pairs"));
    CHECK(a.evidence.at("earlier_confirm_pairs") == 7);
    CHECK(a.evidence.at("earlier_confirm_mean_ratio") == 0.78);
    CHECK(a.evidence.at("confirm_pairs") == 6);
    CHECK(v.repeat.empty());
  }
  SECTION("a follow-up that carried the pairs of a sweep that left it inconclusive: two sweeps") {
    ConfirmationPlan earlier;
    earlier.outcomes["slow"] = Outcome(SequentialDecision::kInconclusive, 0.9, 16);
    const ConfirmationVerdicts v = JudgeConfirmation(plan, &earlier, config);
    REQUIRE(names(v.anomalies) == std::vector<std::string>{"broken", "gross", "slow"});
    CHECK_THAT(v.anomalies[2].finding,
               Catch::EndsWith("over two sweeps: 16 of the pairs are the sweep before's, which "
                               "left it inconclusive at 0.900 x its peers"));
    CHECK(v.repeat.empty());
  }
  SECTION("a follow-up of a sweep that cleared it, or never measured it again: one sweep's word") {
    ConfirmationPlan earlier;
    earlier.outcomes["slow"] = Outcome(SequentialDecision::kHealthy, 1.0, 4);
    ConfirmationVerdicts v = JudgeConfirmation(plan, &earlier, config);
    CHECK(names(v.anomalies) == std::vector<std::string>{"broken", "gross"});
    CHECK(v.repeat == std::vector<std::string>{"slow"});
    const ConfirmationPlan none;  // not a suspect in the sweep before
    v = JudgeConfirmation(plan, &none, config);
    CHECK(v.repeat == std::vector<std::string>{"slow"});
  }
}

}  // namespace confirmation_verdict_test
}  // namespace tessera::health
