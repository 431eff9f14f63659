#pragma once
// A node that looks slow in a sweep's first measurements is a suspect, not a verdict. The
// confirmation measures each suspect again, interleaved with healthy peers on one time line:
//
//   peer, suspect 1, peer, suspect 2, peer, ...   (a round; then the next round, and so on)
//
// so that every suspect measurement lies between two peer measurements, and its ratio to their
// mean cancels a drift of the shared machine's speed. After each round the sequential test
// (sequential_test.h) decides each suspect still undecided: slow, healthy, or (after its bound of
// pairs) inconclusive. A suspect whose re-measurement fails outright (an error, a timeout, wrong
// data) is a clear fault; one that could not be reached for it (NotMeasured) is inconclusive. A
// peer whose own measurement fails outright is a clear fault too: it leaves the rotation, and with
// no peer left the suspects still undecided are inconclusive. The plan is a pure function of the
// results so far, so that the sweep driver recomputes it on every tick and after a restart, and a
// benchmark runs the same steps.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "healthcheck/sequential_test.h"
#include "tessera/v1/health.pb.h"

namespace tessera::health {

struct ConfirmationConfig {
  // false: no confirmation; FindAnomalies' single-sweep rules decide alone (anomaly.h).
  bool enabled = true;
  // A node whose best first measurement is under this fraction of the nodes' median is a suspect.
  double suspect_fraction = 0.92;
  // A suspect found slow at a mean ratio above this (speed alone, by less than half) is not
  // cordoned on one sweep's evidence: a follow-up sweep measures it again, afresh (none of these
  // pairs carried), and cordons it only if it finds it slow too. Two independent tests condemn a
  // healthy node with chance about alpha squared, whatever one machine's noise did to one sweep.
  // Slower than this is beyond what a machine's noise does beside interleaved peers: at once.
  double repeat_above = 0.5;
  // The nodes lowest beside their neighbours that become suspects (if under NeighbourScreen):
  // more than one, so that healthy nodes' unlucky moments cannot hide a slow one. On a loaded
  // 2-core machine a slow node's first figures fell in fast moments, beside its neighbours, once
  // in about a hundred sweeps, and then two healthy nodes below it were often enough to hide it.
  int neighbour_suspects = 3;
  // The screen beside the neighbours follows the sweep's noise: a node is taken as one of the
  // lowest if its figure could still be a node at the test's slow_ratio that ran this many of
  // the noise's sigmas fast, never under suspect_fraction. A quiet sweep (sigma 0.02-0.05) keeps
  // about suspect_fraction; under load (0.06-0.19) the lowest neighbour_suspects nodes are
  // measured again whatever their figures: a suspect costs measurements, never a verdict.
  double screen_noise_sigmas = 2;
  // Nodes sharing a machine take turns twice; a third time when the first two turns' noise (the
  // sigma of ScreenNoiseSigma) is above this. Under load (sigma 0.06-0.19) a node slowed to 0.8
  // whose two first figures both fell in fast moments read 0.95 of the median and of its
  // neighbours once in about a hundred sweeps, and was then not among the lowest: a third figure
  // and screening on the median of three (ScreenFigures) take the lucky moment out. A quiet
  // machine (0.02-0.05) pays nothing.
  double third_pass_noise_sigma = 0.05;
  // A pair whose two peers disagree with each other by more than this many of their expected
  // spread (the sweep's noise, never under the test's min_sigma) fell in a moment the machine
  // stalled: it is measured again, not counted. Which pairs go depends on the peers alone, never
  // on the suspect's figure, so leaving them out moves no suspect's ratio either way.
  double peer_disagreement_sigmas = 4;
  // Pairs measured again per suspect (peers that disagreed, pairs impossible on their face), at
  // most: past them the suspect is out of rounds.
  int max_measured_again = 4;
  SequentialTestConfig test;
};

// The measured nodes' best first (step 0) compute stress figures, passing checks only.
std::map<std::string, double> BestFirstMeasurements(
    const std::vector<std::string>& nodes, const std::vector<v1::HealthCheckResult>& results);

// The figures the median's screen compares: each measured node's best first figure when it has
// two or fewer (passing checks only), the median of them when it has more (a third pass was
// made because the machine is noisy: one lucky moment no longer lifts a slow node).
std::map<std::string, double> ScreenFigures(const std::vector<std::string>& nodes,
                                            const std::vector<v1::HealthCheckResult>& results);

// The noise the screens follow: SweepNoiseSigma of the nodes neither in `excluded` (condemned)
// nor under suspect_fraction of the median of ScreenFigures (a node at 0.3 would swell it).
double ScreenNoiseSigma(const std::vector<std::string>& nodes,
                        const std::vector<v1::HealthCheckResult>& results,
                        const ConfirmationConfig& config, const std::vector<std::string>& excluded);

// How many times nodes that share a machine take their turns at compute stress, once
// `two_passes` (the results of both turns, or what the stage deadlines left of them) are in:
// 3 when ScreenNoiseSigma is above third_pass_noise_sigma, else 2.
int ComputePassesAfter(const std::vector<std::string>& nodes,
                       const std::vector<v1::HealthCheckResult>& two_passes,
                       const ConfirmationConfig& config, const std::vector<std::string>& excluded);

// The cut of the screen beside the neighbours for a sweep whose first measurements' noise is
// `noise_sigma` (SweepNoiseSigma of every measured node): max(suspect_fraction, the test's
// slow_ratio x exp(screen_noise_sigmas x noise_sigma)).
double NeighbourScreen(const ConfirmationConfig& config, double noise_sigma);

// Suspects, in the sweep's node order: nodes whose ScreenFigures figure is under suspect_fraction
// of the median and, measured in turn with the others (NeighbourRatios), the neighbour_suspects
// nodes whose first figures are lowest beside the nodes measured next to them (geometric mean of
// their ratios) if under NeighbourScreen (with the noise of the nodes not under the median's
// screen), as long as half of the nodes are left as peers: a slow node whose first measurements
// both fell in fast moments of the machine still shows beside its neighbours. `peers` receives the
// others, nearest the median first. Neither holds a node of `excluded` (the nodes already
// condemned).
std::vector<std::string> FindSuspects(const std::vector<std::string>& nodes,
                                      const std::vector<v1::HealthCheckResult>& results,
                                      const ConfirmationConfig& config,
                                      const std::vector<std::string>& excluded,
                                      std::vector<std::string>* peers);

// The machine's noise in a sweep's first measurements: the robust standard deviation (1.4826 x
// MAD) of the peers' log ratios to their neighbours; 0 when the nodes were not measured in turn
// or too few ratios exist. The sequential test pools its pairs' spread with this sigma.
double SweepNoiseSigma(const std::vector<std::string>& suspects,
                       const std::vector<std::string>& peers,
                       const std::vector<v1::HealthCheckResult>& results);

struct SuspectOutcome {
  SequentialOutcome test;
  // Every pair: the suspect's figure and the peers' mean around it.
  std::vector<double> suspect_tflops, peer_tflops;
  // Measurements not paired because the peers around them disagreed (measured again).
  int peers_disagreed = 0;
  // A clear fault found while re-measuring (the verdict and what the check said); empty if none.
  // With no fault, fault_detail says why a re-measurement could not be made (NotMeasured): the
  // suspect is then inconclusive.
  v1::HealthVerdict fault = v1::HEALTH_VERDICT_UNSPECIFIED;
  std::string fault_detail;
};

struct ConfirmationPlan {
  // The next step to run: its number (1, 2, ...) and node; next_node is empty once every
  // suspect is decided or out of rounds.
  int next_step = 0;
  std::string next_node;
  // Steps that have a result (what the confirmation cost in measurements).
  int steps_done = 0;
  // SweepNoiseSigma of the first measurements: every suspect's test pools its sigma with it.
  double noise_sigma = 0;
  std::map<std::string, SuspectOutcome> outcomes;
  // Peers whose own measurement failed outright (an error, a timeout: a node that hung after its
  // first figures) with that result's verdict and error: they are out of the rotation from the
  // next step on, so that one hung peer costs one timeout, not one per round, and a clear fault
  // whoever shows it.
  std::map<std::string, std::pair<v1::HealthVerdict, std::string>> failed_peers;
};

// Whether a suspect found slow must be found slow again by a follow-up sweep before it is
// cordoned: slow for speed alone (no clear fault), at a ratio above config.repeat_above.
bool NeedsRepeat(const SuspectOutcome& outcome, const ConfirmationConfig& config);

// A follow-up sweep goes on with what the sweep it follows left undecided: each node that sweep
// left inconclusive or found slow pending a repeat (NeedsRepeat), and that this sweep measured,
// is a suspect again whatever its first figures (moved from `peers` to `suspects`), and its
// earlier outcome goes to `carried`. An inconclusive node's pairs so far count in its test beside
// the new ones; a repeat starts afresh, so that the two verdicts are independent, but may take
// kRepeatPairsFactor times the pairs: a slow node is still found within two sweeps when a
// loaded machine spreads its pairs (a repeat left inconclusive waits for the next sweep that
// includes it). A repeat clears the node on no fewer pairs than the verdict it repeats took (at
// least min_pairs_slow): a loaded machine gave a node slowed to 0.8, found slow at 0.84 over 6
// pairs, 4 pairs at 1.05 in its follow-up, which cleared it.
inline constexpr int kRepeatPairsFactor = 2;
void CarryUndecided(const ConfirmationPlan& earlier, const ConfirmationConfig& config,
                    std::vector<std::string>* suspects, std::vector<std::string>* peers,
                    std::map<std::string, SuspectOutcome>* carried);

// Replays the confirmation over `results` (compute stress results with step >= 1; the first of
// each step counts). A suspect in `carried` (CarryUndecided) left inconclusive starts with its
// pairs and gets up to max_pairs more; one to repeat starts afresh with up to kRepeatPairsFactor
// times max_pairs.
ConfirmationPlan PlanConfirmation(const std::vector<std::string>& suspects,
                                  const std::vector<std::string>& peers,
                                  const std::vector<v1::HealthCheckResult>& results,
                                  const ConfirmationConfig& config,
                                  const std::map<std::string, SuspectOutcome>& carried = {});

// "node-4: slow, 0.79 x its peers' compute rate over 3 pairs (LLR 12.1 >= 6.9) ...": the sweep's
// line for it.
std::string DescribeOutcome(const std::string& node, const SuspectOutcome& outcome);

}  // namespace tessera::health
