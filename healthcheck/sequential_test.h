#pragma once
// Whether a suspect node is slow, decided with enough evidence and only then: Wald's sequential
// probability ratio test (SPRT) on paired measurements. Each pair is the suspect's rate over the
// rate of peers measured just before and just after it on the same machine's time line, so that
// a drift of the machine's own speed, which slows both, cancels. On the log of these ratios
// (roughly normal) the test weighs
//
//   H0  the node is healthy:  mean log ratio = 0
//   H1  the node is slow:     mean log ratio = log(slow_ratio)
//
// with the log-likelihood ratio  LLR = (mu1 - mu0) / sigma^2 * sum(x_i - (mu0 + mu1) / 2),
// sigma estimated from the pairs themselves, pooled with a prior sigma (the machine's noise
// measured elsewhere in the sweep) that weighs as prior_weight pairs:
//
//   sigma^2 = (sum (x_i - mean)^2 + prior_weight * prior_sigma^2) / (n - 1 + prior_weight)
//
// so that a few pairs that happen to agree do not make a small difference decisive on a noisy
// machine, while many pairs speak for themselves (never under min_sigma). It stops as soon as the
// LLR crosses log((1 - beta) / alpha) (slow: a healthy node is condemned with chance at most alpha)
// or log(beta / (1 - alpha)) (healthy: a slow node is cleared with chance at most beta), and
// after max_pairs without either the node is inconclusive: measured again later, not condemned.
// A slow decision also waits for min_pairs_slow pairs: with sigma estimated from a handful of
// pairs, a healthy node's unlucky few can cross the bound far more often than alpha says (a
// 2-core machine condemned one at 0.72 over 4 pairs), while clearing a node early costs nothing
// but a missed chance, which the next sweep takes. Not so when the test repeats a slow verdict
// (a follow-up sweep's): clearing the node there discards the first finding, so a healthy
// decision waits for min_pairs_healthy pairs (confirmation.h sets it).
//
// A pair impossible on its face (its ratio more than outlier_factor times above or below the
// median of the node's pairs: a measurement that hardly ran because the machine stalled under it,
// not a node's speed) is set aside rather than counted, a few at most, and the node is measured
// once more in its place. One such pair (0.015 beside pairs at 0.62-0.93) inflated sigma enough
// to leave a slow node inconclusive over 32 pairs. The median is the node's own, so a node slow
// by any factor is judged on its figures; past max_set_aside such pairs a node's figures count
// whatever they are.

#include <string>
#include <vector>

namespace tessera::health {

struct SequentialTestConfig {
  // The speed, relative to its peers, at which a node counts as slow (H1).
  double slow_ratio = 0.85;
  // The chance of condemning a healthy node, and of clearing a slow one (as small: a slow node
  // cleared slows every run placed on it, and the noise of a shared machine has heavier tails
  // than the normal model assumes).
  double alpha = 0.001;
  double beta = 0.001;
  // No decision from fewer pairs (sigma needs a few), no slow one from fewer than min_pairs_slow,
  // no healthy one from fewer than min_pairs_healthy, and none later than max_pairs.
  int min_pairs = 4;
  int min_pairs_slow = 6;
  int min_pairs_healthy = 4;
  int max_pairs = 16;
  // A floor on the log ratios' standard deviation: identical figures must not make any
  // difference from 1 decisive.
  double min_sigma = 0.02;
  // The prior (0: none) and how many pairs it counts as.
  double prior_sigma = 0;
  int prior_weight = 4;
  // Pairs set aside as impossible on their face, judged from min_pairs on (0: none).
  double outlier_factor = 4;
  int max_set_aside = 2;
};

enum class SequentialDecision { kContinue, kSlow, kHealthy, kInconclusive };

struct SequentialOutcome {
  SequentialDecision decision = SequentialDecision::kContinue;
  int pairs = 0;  // counted; the set-aside ones are not
  int set_aside = 0;
  // The geometric mean of the ratios (exp of the mean log ratio).
  double mean_ratio = 1.0;
  double sigma = 0;  // of the log ratios, as used
  double llr = 0;
  double slow_bound = 0;     // log((1 - beta) / alpha)
  double healthy_bound = 0;  // log(beta / (1 - alpha))
};

// Decides on the ratios so far (each > 0; others are ignored, outliers set aside).
SequentialOutcome DecideSequentially(const std::vector<double>& ratios,
                                     const SequentialTestConfig& config);

// "slow", "healthy", "inconclusive", "undecided".
std::string DecisionName(SequentialDecision d);

// An error naming the first field out of range, empty when the config is usable.
std::string ValidateSequentialTest(const SequentialTestConfig& config);

}  // namespace tessera::health
