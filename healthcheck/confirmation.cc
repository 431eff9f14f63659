#include "healthcheck/confirmation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "healthcheck/anomaly.h"

namespace tessera::health {
namespace {

bool IsCompute(const v1::HealthCheckResult& r) {
  return r.kind() == v1::HEALTH_CHECK_KIND_COMPUTE_STRESS;
}

// A figure to compare: the check passed (or only fell short of the node's own expected rate,
// which peers judge better) and measured something.
bool Usable(const v1::HealthCheckResult& r) {
  return (r.verdict() == v1::HEALTH_VERDICT_PASSED || r.verdict() == v1::HEALTH_VERDICT_SLOW) &&
         r.compute_tflops() > 0 && std::isfinite(r.compute_tflops());
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

std::map<std::string, double> BestFirstMeasurements(
    const std::vector<std::string>& nodes, const std::vector<v1::HealthCheckResult>& results) {
  std::map<std::string, double> best;
  for (const auto& r : results) {
    if (!IsCompute(r) || r.step() != 0 || !Usable(r) || !Contains(nodes, r.node_name())) continue;
    double& b = best[r.node_name()];
    b = std::max(b, r.compute_tflops());
  }
  return best;
}

double NeighbourScreen(const ConfirmationConfig& config, double noise_sigma) {
  return std::max(config.suspect_fraction,
                  config.test.slow_ratio * std::exp(config.screen_noise_sigmas * noise_sigma));
}

std::map<std::string, double> ScreenFigures(const std::vector<std::string>& nodes,
                                            const std::vector<v1::HealthCheckResult>& results) {
  std::map<std::string, std::vector<double>> figures;
  for (const auto& r : results) {
    if (!IsCompute(r) || r.step() != 0 || !Usable(r) || !Contains(nodes, r.node_name())) continue;
    figures[r.node_name()].push_back(r.compute_tflops());
  }
  std::map<std::string, double> out;
  for (const auto& [node, values] : figures) {
    out[node] =
        values.size() > 2 ? Median(values) : *std::max_element(values.begin(), values.end());
  }
  return out;
}

namespace {

// The sweep's measured nodes split by the median's screen (ScreenFigures): `judged` (not
// excluded), `suspect_or_condemned` (under suspect_fraction of the median, or excluded) and
// `others`. Empty when fewer than two nodes were measured.
struct MedianScreen {
  std::map<std::string, double> figures;
  double median = 0;
  std::vector<std::string> judged, suspect_or_condemned, others;
  size_t judged_below_median = 0;
};

MedianScreen ScreenByMedian(const std::vector<std::string>& nodes,
                            const std::vector<v1::HealthCheckResult>& results,
                            const ConfirmationConfig& config,
                            const std::vector<std::string>& excluded) {
  MedianScreen screen;
  screen.figures = ScreenFigures(nodes, results);
  std::vector<double> rates;
  for (const auto& [node, rate] : screen.figures) rates.push_back(rate);
  if (rates.size() < 2) return {};
  screen.median = Median(rates);
  for (const auto& node : nodes) {
    const auto it = screen.figures.find(node);
    if (it == screen.figures.end()) continue;
    const bool below = it->second / screen.median < config.suspect_fraction;
    (below || Contains(excluded, node) ? screen.suspect_or_condemned : screen.others)
        .push_back(node);
    if (Contains(excluded, node)) continue;
    screen.judged.push_back(node);
    if (below) ++screen.judged_below_median;
  }
  return screen;
}

}  // namespace

double ScreenNoiseSigma(const std::vector<std::string>& nodes,
                        const std::vector<v1::HealthCheckResult>& results,
                        const ConfirmationConfig& config,
                        const std::vector<std::string>& excluded) {
  const MedianScreen screen = ScreenByMedian(nodes, results, config, excluded);
  return SweepNoiseSigma(screen.suspect_or_condemned, screen.others, results);
}

int ComputePassesAfter(const std::vector<std::string>& nodes,
                       const std::vector<v1::HealthCheckResult>& two_passes,
                       const ConfirmationConfig& config, const std::vector<std::string>& excluded) {
  return ScreenNoiseSigma(nodes, two_passes, config, excluded) > config.third_pass_noise_sigma ? 3
                                                                                               : 2;
}

std::vector<std::string> FindSuspects(const std::vector<std::string>& nodes,
                                      const std::vector<v1::HealthCheckResult>& results,
                                      const ConfirmationConfig& config,
                                      const std::vector<std::string>& excluded,
                                      std::vector<std::string>* peers) {
  peers->clear();
  const MedianScreen split = ScreenByMedian(nodes, results, config, excluded);
  if (split.judged.empty()) return {};
  const auto& judged = split.judged;
  const auto& others = split.others;
  // The nodes lowest beside their neighbours, if under the screen: a few at most, so that the
  // noise of a shared machine does not make half the nodes suspects every sweep, and never so
  // many that under half of the nodes are left as peers to measure them beside.
  const double screen =
      NeighbourScreen(config, SweepNoiseSigma(split.suspect_or_condemned, others, results));
  std::vector<std::pair<double, std::string>> beside;
  for (const auto& [node, ratios] : NeighbourRatios(results, nodes)) {
    const double relative = GeometricMean(ratios);
    if (relative < screen && Contains(judged, node)) beside.emplace_back(relative, node);
  }
  std::sort(beside.begin(), beside.end());
  const size_t half = judged.size() / 2;
  size_t room = half > split.judged_below_median ? half - split.judged_below_median : 0;
  std::vector<std::string> lowest_beside;
  for (size_t i = 0; i < beside.size() && i < static_cast<size_t>(config.neighbour_suspects); ++i) {
    const std::string& node = beside[i].second;
    if (!Contains(others, node)) continue;  // a suspect already: it takes its slot
    if (room == 0) break;
    lowest_beside.push_back(node);
    --room;
  }
  std::vector<std::string> suspects;
  std::vector<std::pair<double, std::string>> by_distance;
  for (const auto& node : judged) {
    if (!Contains(others, node) || Contains(lowest_beside, node)) {
      suspects.push_back(node);
    } else {
      by_distance.emplace_back(std::abs(split.figures.at(node) / split.median - 1), node);
    }
  }
  std::stable_sort(by_distance.begin(), by_distance.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [distance, node] : by_distance) peers->push_back(std::move(node));
  return suspects;
}

double SweepNoiseSigma(const std::vector<std::string>& suspects,
                       const std::vector<std::string>& peers,
                       const std::vector<v1::HealthCheckResult>& results) {
  std::vector<std::string> nodes = suspects;
  nodes.insert(nodes.end(), peers.begin(), peers.end());
  std::vector<double> logs;
  for (const auto& [node, ratios] : NeighbourRatios(results, nodes)) {
    if (!Contains(peers, node)) continue;
    for (double r : ratios) logs.push_back(std::log(r));
  }
  if (logs.size() < 4) return 0;
  return kMadToSigma * MedianAbsoluteDeviation(logs, Median(logs));
}

bool NeedsRepeat(const SuspectOutcome& outcome, const ConfirmationConfig& config) {
  return outcome.fault == v1::HEALTH_VERDICT_UNSPECIFIED &&
         outcome.test.decision == SequentialDecision::kSlow &&
         outcome.test.mean_ratio > config.repeat_above;
}

void CarryUndecided(const ConfirmationPlan& earlier, const ConfirmationConfig& config,
                    std::vector<std::string>* suspects, std::vector<std::string>* peers,
                    std::map<std::string, SuspectOutcome>* carried) {
  for (const auto& [node, outcome] : earlier.outcomes) {
    const bool inconclusive = outcome.test.decision == SequentialDecision::kInconclusive &&
                              outcome.fault == v1::HEALTH_VERDICT_UNSPECIFIED;
    if (!inconclusive && !NeedsRepeat(outcome, config)) continue;
    const auto peer = std::find(peers->begin(), peers->end(), node);
    if (peer != peers->end()) {
      peers->erase(peer);
      suspects->push_back(node);
    }
    if (Contains(*suspects, node)) (*carried)[node] = outcome;
  }
}

ConfirmationPlan PlanConfirmation(const std::vector<std::string>& suspects,
                                  const std::vector<std::string>& peers,
                                  const std::vector<v1::HealthCheckResult>& results,
                                  const ConfirmationConfig& config,
                                  const std::map<std::string, SuspectOutcome>& carried) {
  ConfirmationPlan plan;
  // The sigma the test assumes is pooled with the machine's noise in this sweep's first
  // measurements: a few pairs that happen to agree must not make a small difference decisive.
  SequentialTestConfig test = config.test;
  plan.noise_sigma = SweepNoiseSigma(suspects, peers, results);
  test.prior_sigma = plan.noise_sigma;
  // Each suspect's test, and its pairs so far (a carried one's from the sweep before).
  std::map<std::string, SequentialTestConfig> tests;
  std::map<std::string, std::vector<double>> ratios;
  int rounds = test.max_pairs;  // one new pair a round for each suspect still undecided
  for (const auto& s : suspects) {
    SuspectOutcome& o = plan.outcomes[s];
    tests[s] = test;
    if (const auto it = carried.find(s); it != carried.end() && NeedsRepeat(it->second, config)) {
      tests[s].max_pairs *= kRepeatPairsFactor;  // afresh: none of its pairs count here
      // Clearing it overturns the slow verdict it repeats: not on less evidence than that had.
      tests[s].min_pairs_healthy = std::min(
          tests[s].max_pairs,
          std::max({tests[s].min_pairs_healthy, tests[s].min_pairs_slow, it->second.test.pairs}));
    } else if (it != carried.end()) {
      o.suspect_tflops = it->second.suspect_tflops;
      o.peer_tflops = it->second.peer_tflops;
      for (size_t i = 0; i < o.suspect_tflops.size() && i < o.peer_tflops.size(); ++i) {
        ratios[s].push_back(o.suspect_tflops[i] / o.peer_tflops[i]);
      }
      tests[s].max_pairs += static_cast<int>(ratios[s].size());
    }
    o.test = DecideSequentially(ratios[s], tests[s]);
    o.test.decision = SequentialDecision::kContinue;  // measured at least once more here
    rounds = std::max(rounds, tests[s].max_pairs - static_cast<int>(ratios[s].size()));
  }
  if (suspects.empty()) return plan;
  if (peers.empty()) {  // nothing to compare with: undecidable here
    for (auto& [node, o] : plan.outcomes) o.test.decision = SequentialDecision::kInconclusive;
    return plan;
  }
  std::map<int, const v1::HealthCheckResult*> by_step;
  for (const auto& r : results) {
    if (IsCompute(r) && r.step() >= 1) by_step.emplace(r.step(), &r);  // the first one counts
  }
  // The step at which each peer's measurement first failed outright.
  std::map<std::string, int> peer_failed_at;
  for (const auto& [step, r] : by_step) {
    if (!Contains(peers, r->node_name()) || Usable(*r) || NotMeasured(*r)) continue;
    if (peer_failed_at.emplace(r->node_name(), step).second) {
      plan.failed_peers[r->node_name()] = {
          r->verdict(), r->error().empty() ? std::string("no compute figure") : r->error()};
    }
  }
  // The time line of steps: node by step number (1-based; index 0 unused).
  std::vector<std::string> line = {""};
  size_t peer_turn = 0;
  auto add = [&](const std::string& node) { line.push_back(node); };
  // The next peer in turn for the step about to be added, skipping those that failed at an
  // earlier step (known when that step was planned, so a replay plans it alike); empty when none
  // is left.
  auto next_peer = [&]() -> std::string {
    const int step = static_cast<int>(line.size());
    for (size_t tried = 0; tried < peers.size(); ++tried) {
      const std::string& p = peers[peer_turn++ % peers.size()];
      const auto failed = peer_failed_at.find(p);
      if (failed == peer_failed_at.end() || failed->second >= step) return p;
    }
    return "";
  };
  add(next_peer());
  std::vector<std::string> undecided = suspects;
  // How far the two peers around each pair so far disagreed (log of before over after), in
  // order: a pair's peers disagree when theirs lies beyond peer_disagreement_sigmas of its spread
  // from the median of all so far. The median, not zero: a machine whose speed drifts steadily
  // makes every pair's peers disagree alike, which the pairing cancels; a stall makes one pair's
  // peers disagree unlike the others'. The spread is the MAD's sigma, never under the sweep's
  // noise or the test's floor; fewer than 4 tell nothing yet.
  std::vector<double> disagreements;
  auto disagree = [&](double before, double after) {
    const double d = std::log(before / after);
    disagreements.push_back(d);
    if (disagreements.size() < 4) return false;
    const double center = Median(disagreements);
    const double spread = std::max({kMadToSigma * MedianAbsoluteDeviation(disagreements, center),
                                    plan.noise_sigma, test.min_sigma});
    return std::abs(d - center) > config.peer_disagreement_sigmas * spread;
  };
  // A pair measured again (peers that disagreed, one impossible on its face): a round more each.
  bool out_of_peers = false;
  for (int round = 0;
       round < rounds + config.max_measured_again && !undecided.empty() && !out_of_peers; ++round) {
    const int first = static_cast<int>(line.size());  // the round's first suspect step
    std::vector<std::string> measured;  // this round's suspects, each between two peers
    for (const auto& s : undecided) {
      add(s);
      const std::string peer = next_peer();
      if (peer.empty()) {
        line.pop_back();
        out_of_peers = true;
        break;
      }
      add(peer);
      measured.push_back(s);
    }
    for (int step = first - 1; step < static_cast<int>(line.size()); ++step) {
      if (!by_step.count(step)) {
        plan.next_step = step;
        plan.next_node = line[static_cast<size_t>(step)];
        plan.steps_done = step - 1;
        return plan;
      }
    }
    std::vector<std::string> still(undecided.begin() + static_cast<ptrdiff_t>(measured.size()),
                                   undecided.end());
    for (size_t k = 0; k < measured.size(); ++k) {
      const std::string& s = measured[k];
      SuspectOutcome& o = plan.outcomes[s];
      const int step = first + 2 * static_cast<int>(k);
      const v1::HealthCheckResult& mine = *by_step.at(step);
      if (NotMeasured(mine)) {  // out of reach: no evidence either way, measured again later
        o.test.decision = SequentialDecision::kInconclusive;
        o.fault_detail = mine.error();
        continue;
      }
      if (!Usable(mine)) {
        o.fault =
            mine.verdict() == v1::HEALTH_VERDICT_PASSED || mine.verdict() == v1::HEALTH_VERDICT_SLOW
                ? v1::HEALTH_VERDICT_ERROR
                : mine.verdict();
        o.fault_detail = mine.error().empty() ? "no compute figure" : mine.error();
        continue;  // decided: a clear fault
      }
      std::vector<double> around;
      for (int neighbour : {step - 1, step + 1}) {
        const v1::HealthCheckResult& peer = *by_step.at(neighbour);
        if (Usable(peer)) around.push_back(peer.compute_tflops());
      }
      const double sum = std::accumulate(around.begin(), around.end(), 0.0);
      const auto n = static_cast<double>(around.size());
      const bool disagreed = around.size() == 2 && disagree(around[0], around[1]) &&
                             o.peers_disagreed + o.test.set_aside < config.max_measured_again;
      if (disagreed) {
        ++o.peers_disagreed;  // measured again in the next round
      } else if (n > 0) {
        o.suspect_tflops.push_back(mine.compute_tflops());
        o.peer_tflops.push_back(sum / n);
        ratios[s].push_back(mine.compute_tflops() / (sum / n));
      }
      o.test = DecideSequentially(ratios[s], tests[s]);
      if (o.test.decision == SequentialDecision::kContinue) still.push_back(s);
    }
    undecided = std::move(still);
  }
  // Out of rounds (pairs without a usable peer count too) or of peers.
  for (const auto& s : undecided) {
    plan.outcomes[s].test.decision = SequentialDecision::kInconclusive;
  }
  plan.steps_done = static_cast<int>(line.size()) - 1;
  return plan;
}

std::string DescribeOutcome(const std::string& node, const SuspectOutcome& o) {
  if (o.fault != v1::HEALTH_VERDICT_UNSPECIFIED) {
    return absl::StrFormat("%s: compute stress %s when measured again: %s", node,
                           v1::HealthVerdict_Name(o.fault), o.fault_detail);
  }
  const auto& t = o.test;
  std::string set_aside =
      t.set_aside == 0 ? "" : absl::StrFormat(", %d set aside as impossible", t.set_aside);
  if (o.peers_disagreed > 0) {
    absl::StrAppendFormat(&set_aside, ", %d measured again (its peers disagreed)",
                          o.peers_disagreed);
  }
  const std::string figures = absl::StrFormat(
      "%.3f x its peers' compute rate over %d pair%s measured in turn with them%s (LLR %.2f",
      t.mean_ratio, t.pairs, t.pairs == 1 ? "" : "s", set_aside, t.llr);
  switch (t.decision) {
    case SequentialDecision::kSlow:
      return absl::StrFormat("%s: slow: %s reached %.2f)", node, figures, t.slow_bound);
    case SequentialDecision::kHealthy:
      return absl::StrFormat("%s: cleared: %s reached %.2f)", node, figures, t.healthy_bound);
    case SequentialDecision::kInconclusive:
      return absl::StrFormat(
          "%s: inconclusive: %s, between %.2f and %.2f)%s; measured again in a follow-up sweep",
          node, figures, t.healthy_bound, t.slow_bound,
          o.fault_detail.empty() ? "" : absl::StrCat(", then not measured: ", o.fault_detail));
    case SequentialDecision::kContinue:
      break;
  }
  return absl::StrFormat("%s: undecided: %s)", node, figures);
}

}  // namespace tessera::health
