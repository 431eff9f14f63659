#include "healthcheck/anomaly.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tessera::health {
namespace {

bool Failed(v1::HealthVerdict v) { return v != v1::HEALTH_VERDICT_PASSED; }

// A check that failed on the node's account (not merely slow, and not one never made).
bool FailedOutright(const v1::HealthCheckResult& r) {
  return Failed(r.verdict()) && r.verdict() != v1::HEALTH_VERDICT_SLOW && !NotMeasured(r);
}

// Which values are far below the others' median, by the rules in anomaly.h.
std::vector<bool> FarBelow(const std::vector<double>& values, const AnomalyConfig& c, bool use_mad,
                           double* median_out, double* mad_out) {
  const double median = Median(values);
  const double mad = MedianAbsoluteDeviation(values, median);
  *median_out = median;
  *mad_out = mad;
  const bool spread = static_cast<int>(values.size()) >= c.min_nodes_for_spread;
  std::vector<bool> slow(values.size(), false);
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (spread) {
      const double sigma = kMadToSigma * mad;
      slow[i] =
          v < c.slow_fraction * median && (!use_mad || sigma <= 0 || median - v > c.mad_k * sigma);
    } else {
      slow[i] = v < c.small_group_fraction * median;
    }
  }
  return slow;
}

// Each node's best ratio to the nodes measured beside it (NeighbourRatios); empty when the
// nodes were not measured in turn.
std::map<std::string, double> BestBesideNeighbours(
    const std::vector<v1::HealthCheckResult>& results, const std::vector<std::string>& nodes) {
  std::map<std::string, double> best;
  for (const auto& [node, ratios] : NeighbourRatios(results, nodes)) {
    best[node] = *std::max_element(ratios.begin(), ratios.end());
  }
  return best;
}

}  // namespace

std::optional<Anomaly> ConfirmedAnomaly(const std::string& node, const SuspectOutcome& o) {
  const bool slow = o.test.decision == SequentialDecision::kSlow;
  if (o.fault == v1::HEALTH_VERDICT_UNSPECIFIED && !slow) return std::nullopt;
  Anomaly a{node, slow ? v1::HEALTH_VERDICT_SLOW : o.fault, DescribeOutcome(node, o), {}};
  if (!slow) return a;
  a.evidence = {{"confirm_pairs", o.test.pairs},
                {"confirm_mean_ratio", o.test.mean_ratio},
                {"confirm_sigma", o.test.sigma},
                {"confirm_llr", o.test.llr},
                {"confirm_llr_slow_bound", o.test.slow_bound},
                {"confirm_llr_healthy_bound", o.test.healthy_bound}};
  for (size_t i = 0; i < o.suspect_tflops.size(); ++i) {
    a.evidence[absl::StrCat("confirm_", i + 1, "_tflops")] = o.suspect_tflops[i];
    a.evidence[absl::StrCat("confirm_", i + 1, "_peer_tflops")] = o.peer_tflops[i];
  }
  return a;
}

ConfirmationVerdicts JudgeConfirmation(const ConfirmationPlan& plan,
                                       const ConfirmationPlan* earlier,
                                       const ConfirmationConfig& config) {
  ConfirmationVerdicts out;
  for (const auto& [node, outcome] : plan.outcomes) {
    if (NeedsRepeat(outcome, config)) {
      const SuspectOutcome* before = nullptr;
      if (earlier != nullptr) {
        const auto it = earlier->outcomes.find(node);
        if (it != earlier->outcomes.end()) before = &it->second;
      }
      // Found slow by the sweep before too (measured apart), or on pairs of both sweeps (the one
      // before left it inconclusive, and its pairs count here): two sweeps' evidence.
      const bool repeated = before != nullptr && NeedsRepeat(*before, config);
      const bool spans_two = before != nullptr &&
                             before->test.decision == SequentialDecision::kInconclusive &&
                             before->fault == v1::HEALTH_VERDICT_UNSPECIFIED;
      if (!repeated && !spans_two) {
        out.repeat.push_back(node);
        continue;
      }
      Anomaly a = *ConfirmedAnomaly(node, outcome);
      absl::StrAppend(
          &a.finding,
          repeated ? absl::StrFormat("; slow in the sweep before too, measured apart: %.3f x its "
                                     "peers over %d pairs",
                                     before->test.mean_ratio, before->test.pairs)
                   : absl::StrFormat("; over two sweeps: %d of the pairs are the sweep before's, "
                                     "which left it inconclusive at %.3f x its peers",
                                     before->test.pairs, before->test.mean_ratio));
      a.evidence["earlier_confirm_pairs"] = before->test.pairs;
      a.evidence["earlier_confirm_mean_ratio"] = before->test.mean_ratio;
      a.evidence["earlier_confirm_llr"] = before->test.llr;
      out.anomalies.push_back(std::move(a));
    } else if (auto a = ConfirmedAnomaly(node, outcome)) {
      out.anomalies.push_back(*std::move(a));
    } else if (outcome.test.decision != SequentialDecision::kHealthy) {
      out.inconclusive.push_back(node);
    }
  }
  for (const auto& [node, failure] : plan.failed_peers) {
    out.anomalies.push_back(
        Anomaly{node,
                failure.first,
                absl::StrFormat("%s: compute stress %s when measured as a peer of the suspects: %s",
                                node, v1::HealthVerdict_Name(failure.first), failure.second),
                {}});
  }
  return out;
}

bool NotMeasured(const v1::HealthCheckResult& result) {
  return result.verdict() == v1::HEALTH_VERDICT_UNSPECIFIED;
}

std::map<std::string, std::string> UnmeasuredNodes(
    const std::vector<std::string>& nodes, const std::vector<v1::HealthCheckResult>& results) {
  std::map<std::string, std::string> out;
  for (const auto& r : results) {
    if (NotMeasured(r) && std::find(nodes.begin(), nodes.end(), r.node_name()) != nodes.end()) {
      out.emplace(r.node_name(), r.error());  // the first one stands
    }
  }
  return out;
}

bool NotMeasuredIn(const v1::Sweep& sweep, const std::string& node) {
  const std::string prefix = absl::StrCat(kNotMeasuredPrefix, node, ":");
  return std::any_of(sweep.findings().begin(), sweep.findings().end(),
                     [&](const std::string& f) { return f.rfind(prefix, 0) == 0; });
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double GeometricMean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += std::log(v);
  return values.empty() ? 1 : std::exp(sum / static_cast<double>(values.size()));
}

double MedianAbsoluteDeviation(const std::vector<double>& values, double median) {
  std::vector<double> deviations;
  for (double v : values) deviations.push_back(std::abs(v - median));
  return Median(deviations);
}

// A dip of the machine's own speed slows a measurement's neighbours too, so it cancels out; a
// node that is really slow is slow beside every neighbour.
std::map<std::string, std::vector<double>> NeighbourRatios(
    const std::vector<v1::HealthCheckResult>& results, const std::vector<std::string>& nodes) {
  struct Measurement {
    int64_t nanos;
    std::string node;
    double tflops;
  };
  std::vector<Measurement> all;
  std::map<std::string, int> count;
  for (const auto& r : results) {
    if (r.kind() != v1::HEALTH_CHECK_KIND_COMPUTE_STRESS || r.step() != 0 || Failed(r.verdict()) ||
        r.compute_tflops() <= 0 ||
        std::find(nodes.begin(), nodes.end(), r.node_name()) == nodes.end()) {
      continue;
    }
    all.push_back({r.finished_at().seconds() * 1'000'000'000 + r.finished_at().nanos(),
                   r.node_name(), r.compute_tflops()});
    ++count[r.node_name()];
  }
  bool repeated = false;
  for (const auto& [node, n] : count) repeated = repeated || n > 1;
  if (!repeated || count.size() < 2) return {};
  std::stable_sort(all.begin(), all.end(),
                   [](const Measurement& a, const Measurement& b) { return a.nanos < b.nanos; });
  std::map<std::string, std::vector<double>> ratios;
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<double> around;
    int before = 0, after = 0;
    for (size_t j = i; j-- > 0 && before < 2;) {
      if (all[j].node != all[i].node) {
        around.push_back(all[j].tflops);
        ++before;
      }
    }
    for (size_t j = i + 1; j < all.size() && after < 2; ++j) {
      if (all[j].node != all[i].node) {
        around.push_back(all[j].tflops);
        ++after;
      }
    }
    if (!around.empty()) ratios[all[i].node].push_back(all[i].tflops / Median(around));
  }
  return ratios;
}

std::vector<GroupJudgement> JudgeGroups(const std::vector<std::vector<std::string>>& groups,
                                        const std::vector<v1::HealthCheckResult>& results,
                                        const AnomalyConfig& config) {
  std::map<std::string, std::vector<const v1::HealthCheckResult*>> allreduce;  // by node
  for (const auto& r : results) {
    if (r.kind() == v1::HEALTH_CHECK_KIND_ALLREDUCE) allreduce[r.node_name()].push_back(&r);
  }
  std::vector<GroupJudgement> judged(groups.size());
  std::vector<double> busbw;
  std::vector<size_t> measured_groups;
  for (size_t g = 0; g < groups.size(); ++g) {
    GroupJudgement& j = judged[g];
    const auto result_of = [&](const std::string& member) -> const v1::HealthCheckResult* {
      const v1::HealthCheckResult* mine = nullptr;
      for (const auto* r : allreduce[member]) {
        if (std::vector<std::string>(r->group().begin(), r->group().end()) == groups[g]) mine = r;
      }
      return mine;
    };
    // A member never reached leaves its partners waiting for it: their failures say nothing.
    for (const auto& member : groups[g]) {
      const v1::HealthCheckResult* mine = result_of(member);
      if (mine != nullptr && NotMeasured(*mine)) {
        j = {false, false, v1::HEALTH_VERDICT_UNSPECIFIED,
             absl::StrCat(member, " was not measured: ", mine->error())};
        break;
      }
    }
    if (!j.measured) continue;
    double worst = -1;
    for (const auto& member : groups[g]) {
      const v1::HealthCheckResult* mine = result_of(member);
      if (mine == nullptr) {
        j = {true, true, v1::HEALTH_VERDICT_TIMEOUT,
             absl::StrCat("no all-reduce result from ", member)};
        break;
      }
      if (Failed(mine->verdict())) {
        j = {true, true, mine->verdict(),
             absl::StrCat(member, " reported ", v1::HealthVerdict_Name(mine->verdict()), ": ",
                          mine->error())};
        break;
      }
      if (mine->samples_size() > 0) {
        const double b = mine->samples(mine->samples_size() - 1).busbw_gbps();
        worst = worst < 0 ? b : std::min(worst, b);
      }
    }
    if (!j.bad && worst >= 0) {
      busbw.push_back(worst);
      measured_groups.push_back(g);
    }
  }
  if (busbw.size() >= 2) {
    double median = 0, mad = 0;
    const auto slow = FarBelow(busbw, config, true, &median, &mad);
    for (size_t i = 0; i < busbw.size(); ++i) {
      if (!slow[i]) continue;
      judged[measured_groups[i]] = {
          true, true, v1::HEALTH_VERDICT_SLOW,
          absl::StrFormat("busbw %.3g GB/s, %.2f x the median %.3g of %d groups", busbw[i],
                          median > 0 ? busbw[i] / median : 0, median, busbw.size())};
    }
  }
  return judged;
}

std::vector<Anomaly> FindAnomalies(const std::vector<std::string>& nodes,
                                   const std::vector<std::vector<std::string>>& groups,
                                   const std::vector<v1::HealthCheckResult>& results,
                                   const AnomalyConfig& config) {
  std::map<std::string, Anomaly> found;
  auto condemn = [&](const std::string& node, v1::HealthVerdict verdict, std::string finding,
                     std::map<std::string, double> evidence = {}) {
    if (found.count(node)) return;  // the first (most direct) reason stands
    found[node] = Anomaly{node, verdict, std::move(finding), std::move(evidence)};
  };

  // Compute stress, per node.
  // A node's compute figure: a failed check if it had one, else its best passing measurement
  // (a node measured twice keeps the better one).
  std::map<std::string, const v1::HealthCheckResult*> compute;
  std::set<std::string> unreached;  // a compute check that could not be handed over
  for (const auto& r : results) {
    if (r.kind() == v1::HEALTH_CHECK_KIND_COMPUTE_STRESS && r.step() == 0) {
      if (NotMeasured(r)) {  // no evidence either way
        unreached.insert(r.node_name());
        continue;
      }
      const v1::HealthCheckResult*& best = compute[r.node_name()];
      const bool failed = FailedOutright(r);
      const bool best_failed = best != nullptr && FailedOutright(*best);
      if (best == nullptr || (failed && !best_failed) ||
          (!failed && !best_failed && r.compute_tflops() > best->compute_tflops())) {
        best = &r;
      }
    }
  }
  std::vector<std::string> measured;
  std::vector<double> rates;
  for (const auto& node : nodes) {
    auto it = compute.find(node);
    if (it == compute.end() && unreached.count(node)) continue;  // the lease's to judge
    if (it == compute.end()) {
      condemn(node, v1::HEALTH_VERDICT_TIMEOUT,
              absl::StrFormat("%s: no compute stress result before the sweep's deadline", node));
      continue;
    }
    const auto& r = *it->second;
    if (FailedOutright(r)) {
      condemn(node, r.verdict(),
              absl::StrFormat("%s: compute stress %s: %s", node,
                              v1::HealthVerdict_Name(r.verdict()), r.error()));
      continue;
    }
    measured.push_back(node);
    rates.push_back(r.compute_tflops());
  }
  // Nodes measured one after another (several passes of nodes sharing a machine) must also be
  // slow beside the nodes measured just before and after them, which replaces the MAD guard:
  // the machine's own changes of speed during the sweep would otherwise condemn whichever node
  // they fell on.
  // With confirmation on, speed is never condemned on these figures: every node below its peers
  // is a suspect, measured again between peers (confirmation.h).
  const auto relative = BestBesideNeighbours(results, measured);
  if (measured.size() >= 2 && !config.confirmation.enabled) {
    double median = 0, mad = 0;
    const auto slow = FarBelow(rates, config, relative.empty(), &median, &mad);
    for (size_t i = 0; i < measured.size(); ++i) {
      if (!slow[i]) continue;
      const double fraction = median > 0 ? rates[i] / median : 0;
      std::map<std::string, double> evidence = {{"compute_tflops", rates[i]},
                                                {"peer_median_tflops", median},
                                                {"peer_mad_tflops", mad},
                                                {"fraction_of_median", fraction}};
      std::string finding =
          absl::StrFormat("%s: compute %.3g TFLOP/s, %.2f x the median %.3g of %d nodes (MAD %.3g)",
                          measured[i], rates[i], fraction, median, measured.size(), mad);
      if (!relative.empty()) {
        const auto it = relative.find(measured[i]);
        const double beside = it == relative.end() ? 0 : it->second;
        if (beside >= config.neighbour_fraction) continue;  // a dip of the machine, not the node
        evidence["fraction_of_neighbours"] = beside;
        absl::StrAppend(
            &finding, absl::StrFormat(", and at best %.2f x the nodes measured beside it", beside));
      }
      condemn(measured[i], v1::HEALTH_VERDICT_SLOW, std::move(finding), std::move(evidence));
    }
  }

  const std::vector<GroupJudgement> judged = JudgeGroups(groups, results, config);
  // A member of a bad group is implicated unless another of its groups was fine, or a partner
  // in that group is already condemned on its own.
  std::map<std::string, int> bad_groups, all_groups;  // measured groups only
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!judged[g].measured) continue;
    for (const auto& m : groups[g]) {
      ++all_groups[m];
      if (judged[g].bad) ++bad_groups[m];
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!judged[g].bad) continue;
    bool explained = false;
    for (const auto& m : groups[g]) explained = explained || found.count(m);
    if (explained) continue;
    for (const auto& m : groups[g]) {
      if (bad_groups[m] < all_groups[m]) continue;  // cleared by a good group
      condemn(m, judged[g].verdict,
              absl::StrFormat("%s: all-reduce with %s: %s", m, absl::StrJoin(groups[g], "+"),
                              judged[g].why));
    }
  }

  std::vector<Anomaly> out;
  for (const auto& node : nodes) {
    if (auto it = found.find(node); it != found.end()) out.push_back(it->second);
  }
  return out;
}

}  // namespace tessera::health
