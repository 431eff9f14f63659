#include "healthcheck/sequential_test.h"

#include <algorithm>
#include <cmath>

#include "healthcheck/anomaly.h"

namespace tessera::health {
namespace {

// Drops from `x` (log ratios) the farthest from their median while farther than
// log(outlier_factor), max_set_aside at most; returns how many it dropped.
int SetAsideOutliers(std::vector<double>* x, const SequentialTestConfig& config) {
  if (static_cast<int>(x->size()) < config.min_pairs || config.max_set_aside <= 0) return 0;
  const double median = Median(*x);
  const double limit = std::log(config.outlier_factor);
  int dropped = 0;
  while (dropped < config.max_set_aside) {
    auto farthest = std::max_element(x->begin(), x->end(), [&](double a, double b) {
      return std::abs(a - median) < std::abs(b - median);
    });
    if (farthest == x->end() || std::abs(*farthest - median) <= limit) break;
    x->erase(farthest);
    ++dropped;
  }
  return dropped;
}

}  // namespace

SequentialOutcome DecideSequentially(const std::vector<double>& ratios,
                                     const SequentialTestConfig& config) {
  SequentialOutcome out;
  out.slow_bound = std::log((1 - config.beta) / config.alpha);
  out.healthy_bound = std::log(config.beta / (1 - config.alpha));
  std::vector<double> x;
  for (double r : ratios) {
    if (r > 0 && std::isfinite(r)) x.push_back(std::log(r));
  }
  out.set_aside = SetAsideOutliers(&x, config);
  out.pairs = static_cast<int>(x.size());
  if (x.empty()) {
    out.sigma = config.min_sigma;
    return out;
  }
  double sum = 0;
  for (double v : x) sum += v;
  const double mean = sum / static_cast<double>(x.size());
  out.mean_ratio = std::exp(mean);
  double squares = 0;
  for (double v : x) squares += (v - mean) * (v - mean);
  const double prior = config.prior_sigma > 0 ? static_cast<double>(config.prior_weight) : 0;
  const double dof = static_cast<double>(x.size() - 1) + prior;
  const double sd =
      dof > 0 ? std::sqrt((squares + prior * config.prior_sigma * config.prior_sigma) / dof) : 0;
  out.sigma = std::max(sd, config.min_sigma);
  const double mu0 = 0, mu1 = std::log(config.slow_ratio);
  out.llr = (mu1 - mu0) / (out.sigma * out.sigma) *
            (sum - static_cast<double>(x.size()) * (mu0 + mu1) / 2);
  if (out.pairs >= config.min_pairs) {
    if (out.llr >= out.slow_bound) {
      if (out.pairs >= config.min_pairs_slow) out.decision = SequentialDecision::kSlow;
    } else if (out.llr <= out.healthy_bound && out.pairs >= config.min_pairs_healthy) {
      out.decision = SequentialDecision::kHealthy;
    }
  }
  if (out.decision == SequentialDecision::kContinue && out.pairs >= config.max_pairs) {
    out.decision = SequentialDecision::kInconclusive;
  }
  return out;
}

std::string DecisionName(SequentialDecision d) {
  switch (d) {
    case SequentialDecision::kSlow:
      return "slow";
    case SequentialDecision::kHealthy:
      return "healthy";
    case SequentialDecision::kInconclusive:
      return "inconclusive";
    case SequentialDecision::kContinue:
      break;
  }
  return "undecided";
}

std::string ValidateSequentialTest(const SequentialTestConfig& c) {
  if (!(c.slow_ratio > 0 && c.slow_ratio < 1)) return "slow_ratio: must be between 0 and 1";
  if (!(c.alpha > 0 && c.alpha < 0.5)) return "alpha: must be between 0 and 0.5";
  if (!(c.beta > 0 && c.beta < 0.5)) return "beta: must be between 0 and 0.5";
  if (c.min_pairs < 2) return "min_pairs: must be at least 2";
  if (c.min_pairs_slow < c.min_pairs) return "min_pairs_slow: must be at least min_pairs";
  if (c.min_pairs_healthy < c.min_pairs) return "min_pairs_healthy: must be at least min_pairs";
  if (c.max_pairs < std::max(c.min_pairs_slow, c.min_pairs_healthy)) {
    return "max_pairs: must be at least min_pairs_slow and min_pairs_healthy";
  }
  if (!(c.min_sigma > 0)) return "min_sigma: must be more than 0";
  if (c.prior_sigma < 0 || c.prior_weight < 0) return "prior: must not be negative";
  if (!(c.outlier_factor > 1)) return "outlier_factor: must be more than 1";
  if (c.max_set_aside < 0) return "max_set_aside: must not be negative";
  return "";
}

}  // namespace tessera::health
