// Wald's sequential test on the log ratios of paired measurements (sequential_test.h): its
// bounds, its LLR computed independently, when it may decide, and its settings checked.
#include "healthcheck/sequential_test.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace tessera::health {
namespace sequential_test_test {

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
  c.min_pairs_healthy = 3;
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

TEST_CASE("the sequential test: a clearing waits for min_pairs_healthy where it is raised") {
  SequentialTestConfig c;
  c.min_pairs_healthy = 6;  // a follow-up repeating a slow verdict of 6 pairs
  const std::vector<double> four = {1.05, 1.05, 1.04, 1.06};
  const auto early = DecideSequentially(four, c);
  CHECK(early.llr < early.healthy_bound);
  CHECK(early.decision == SequentialDecision::kContinue);
  std::vector<double> six = four;
  six.insert(six.end(), {1.05, 1.05});
  CHECK(DecideSequentially(six, c).decision == SequentialDecision::kHealthy);
  // A slow verdict is not held back by it.
  CHECK(DecideSequentially({0.72, 0.72, 0.73, 0.71, 0.72, 0.72}, c).decision ==
        SequentialDecision::kSlow);
}

TEST_CASE("the sequential test sets aside a pair impossible on its face, a few at most") {
  const SequentialTestConfig c;  // a factor of 4 from the median, two at most
  // The 2-core machine's miss: a slow node's pairs at 0.62-0.93 and one at 0.015 (a measurement
  // that hardly ran). Counted, the one pair's spread keeps the test between its bounds.
  std::vector<double> slow = {0.70, 0.62, 0.93, 0.015, 0.75, 0.68, 0.81, 0.72};
  SequentialTestConfig counted = c;
  counted.max_set_aside = 0;
  CHECK(DecideSequentially(slow, counted).decision == SequentialDecision::kContinue);
  const auto judged = DecideSequentially(slow, c);
  CHECK(judged.set_aside == 1);
  CHECK(judged.pairs == 7);
  CHECK(judged.decision == SequentialDecision::kSlow);
  std::vector<double> without = slow;
  without.erase(without.begin() + 3);
  CHECK(judged.llr == Approx(DecideSequentially(without, c).llr));
  // Both ways: a burst of the node beside stalled peers is set aside as well.
  const auto burst = DecideSequentially({1.0, 1.01, 0.99, 30.0, 1.0}, c);
  CHECK(burst.set_aside == 1);
  CHECK(burst.decision == SequentialDecision::kHealthy);
  // A node slow by any factor is judged on its own median: nothing set aside, condemned.
  const auto crawling = DecideSequentially({0.01, 0.012, 0.011, 0.01, 0.009, 0.01}, c);
  CHECK(crawling.set_aside == 0);
  CHECK(crawling.decision == SequentialDecision::kSlow);
  // Not before min_pairs (no median to judge by), and never more than max_set_aside: past them
  // a node's figures count whatever they are.
  CHECK(DecideSequentially({0.8, 0.01, 0.8}, c).set_aside == 0);
  const auto erratic = DecideSequentially({1.0, 0.01, 1.0, 0.01, 1.0, 0.01, 1.0, 100.0}, c);
  CHECK(erratic.set_aside == 2);
  CHECK(erratic.pairs == 6);
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
  CHECK(ValidateSequentialTest(c) ==
        "max_pairs: must be at least min_pairs_slow and min_pairs_healthy");
  c = {};
  c.min_pairs_healthy = 20;
  CHECK(ValidateSequentialTest(c) ==
        "max_pairs: must be at least min_pairs_slow and min_pairs_healthy");
  c = {};
  c.min_pairs_healthy = 3;
  CHECK(ValidateSequentialTest(c) == "min_pairs_healthy: must be at least min_pairs");
  c = {};
  c.min_pairs_slow = 3;
  CHECK(ValidateSequentialTest(c) == "min_pairs_slow: must be at least min_pairs");
  c = {};
  c.prior_weight = -1;
  CHECK(ValidateSequentialTest(c) == "prior: must not be negative");
  c = {};
  c.outlier_factor = 1;
  CHECK(ValidateSequentialTest(c) == "outlier_factor: must be more than 1");
  c = {};
  c.max_set_aside = -1;
  CHECK(ValidateSequentialTest(c) == "max_set_aside: must not be negative");
}

}  // namespace sequential_test_test
}  // namespace tessera::health
