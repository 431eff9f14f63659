// Wald's sequential test on the log ratios of paired measurements (sequential_test.h): its
// bounds, its LLR computed independently, when it may decide, and its settings checked.
#include "healthcheck/sequential_test.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace tessera::health {
namespace {

// The LLR as the header defines it, computed here independently.
double Llr(const std::vector<double>& ratios, double sigma, double slow_ratio) {
  const double mu1 = std::log(slow_ratio);
  double sum = 0;
  for (double r : ratios) sum += std::log(r) - mu1 / 2;
  return mu1 / (sigma * sigma) * sum;
}

TEST_CASE("the sequential test: Wald's bounds, the LLR, and decisions only from min_pairs") {
  CHECK(SequentialTestConfig{}.beta == 0.001);  // the defaults: alpha = beta = 0.001, 4 to 16
  CHECK(SequentialTestConfig{}.min_pairs == 4);
  CHECK(SequentialTestConfig{}.min_pairs_slow == 6);
  CHECK(SequentialTestConfig{}.max_pairs == 16);
  SequentialTestConfig c;  // here: slow 0.85, alpha 0.001, beta 0.01, 3 to 10 pairs
  c.beta = 0.01;
  c.min_pairs = 3;
  c.min_pairs_slow = 3;
  c.max_pairs = 10;
  const auto none = DecideSequentially({}, c);
  CHECK(none.decision == SequentialDecision::kContinue);
  CHECK(none.slow_bound == Approx(std::log(0.99 / 0.001)));
  CHECK(none.healthy_bound == Approx(std::log(0.01 / 0.999)));

  // Two pairs far below: still too few to estimate a spread from.
  CHECK(DecideSequentially({0.8, 0.8}, c).decision == SequentialDecision::kContinue);
  const auto slow = DecideSequentially({0.8, 0.8, 0.8}, c);
  CHECK(slow.decision == SequentialDecision::kSlow);
  CHECK(slow.sigma == c.min_sigma);  // identical ratios: the floor
  CHECK(slow.llr == Approx(Llr({0.8, 0.8, 0.8}, c.min_sigma, 0.85)));
  CHECK(slow.mean_ratio == Approx(0.8));
  CHECK(slow.pairs == 3);

  const std::vector<double> level = {1.0, 1.03, 0.97};
  const auto healthy = DecideSequentially(level, c);
  CHECK(healthy.decision == SequentialDecision::kHealthy);
  double mean = 0, squares = 0;
  for (double r : level) mean += std::log(r) / 3;
  for (double r : level) squares += (std::log(r) - mean) * (std::log(r) - mean);
  CHECK(healthy.sigma == Approx(std::sqrt(squares / 2)));
  CHECK(healthy.llr == Approx(Llr(level, healthy.sigma, 0.85)));

  // Noisy and halfway between healthy and slow: no verdict within the bound.
  std::vector<double> between;
  for (int i = 0; i < 10; ++i) between.push_back(0.922 * (i % 2 == 0 ? 1.08 : 1 / 1.08));
  between.pop_back();
  CHECK(DecideSequentially(between, c).decision == SequentialDecision::kContinue);
  between.push_back(0.922 / 1.08);
  const auto undecided = DecideSequentially(between, c);
  CHECK(undecided.decision == SequentialDecision::kInconclusive);
  CHECK(undecided.llr > undecided.healthy_bound);
  CHECK(undecided.llr < undecided.slow_bound);
  // Ratios that are not positive numbers are left out, not taken as evidence.
  CHECK(DecideSequentially({0.8, 0.8, 0.0, -1.0, NAN}, c).pairs == 2);
}

TEST_CASE("the sequential test: a slow verdict waits for min_pairs_slow, a clearing does not") {
  const SequentialTestConfig c;  // 4 pairs to clear, 6 to condemn
  // Four pairs that agree on 0.72 (what condemned a healthy node on a 2-core machine) cross the
  // bound, but four pairs' spread is too little to trust: measured on.
  const std::vector<double> four = {0.72, 0.72, 0.73, 0.71};
  const auto early = DecideSequentially(four, c);
  CHECK(early.llr > early.slow_bound);
  CHECK(early.decision == SequentialDecision::kContinue);
  std::vector<double> six = four;
  six.insert(six.end(), {0.72, 0.72});
  CHECK(DecideSequentially(six, c).decision == SequentialDecision::kSlow);
  CHECK(DecideSequentially({1.0, 1.01, 0.99, 1.0}, c).decision == SequentialDecision::kHealthy);
  // Over the bound but never enough pairs before max_pairs: inconclusive, never slow.
  SequentialTestConfig tight = c;
  tight.max_pairs = 6;
  tight.min_pairs_slow = 6;
  CHECK(DecideSequentially({0.72, 0.72, 0.72, 0.72, 0.72}, tight).decision ==
        SequentialDecision::kContinue);
}

TEST_CASE("sequential test settings are checked") {
  SequentialTestConfig c;
  CHECK(ValidateSequentialTest(c).empty());
  c.slow_ratio = 1.2;
  CHECK(ValidateSequentialTest(c) == "slow_ratio: must be between 0 and 1");
  c = {};
  c.alpha = 0;
  CHECK(ValidateSequentialTest(c) == "alpha: must be between 0 and 0.5");
  c = {};
  c.max_pairs = 5;
  CHECK(ValidateSequentialTest(c) == "max_pairs: must be at least min_pairs_slow");
  c = {};
  c.min_pairs_slow = 3;
  CHECK(ValidateSequentialTest(c) == "min_pairs_slow: must be at least min_pairs");
  c = {};
  c.prior_weight = -1;
  CHECK(ValidateSequentialTest(c) == "prior: must not be negative");
}

}  // namespace
}  // namespace tessera::health
