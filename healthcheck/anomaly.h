#pragma once
// Which nodes a sweep's results condemn. A node is anomalous when a check on it gave wrong data,
// timed out or failed, or when its figures are far below its peers' median — robust statistics,
// not a fixed number: the median and the median absolute deviation (MAD) of the sweep's nodes.
//
//   compute stress   a node's best measurement < slow_fraction * the median of the nodes' best,
//                    and (with 4 or more nodes) also more than mad_k robust standard deviations
//                    (1.4826 * MAD) below the median. When nodes were measured one after another
//                    in several passes (nodes sharing a machine), the MAD guard is replaced by
//                    a comparison in time: each measurement over the median of the other nodes'
//                    measurements just before and after it; a node whose best such ratio reaches
//                    neighbour_fraction is not slow (the machine's own speed dipped)
//   all-reduce       the same on each group's busbw at its largest payload; a group failing or
//                    slow implicates its members, and a member whose other group passed is
//                    cleared (the ring gives every node two partners)
//
// With fewer than 4 nodes there is too little to estimate a spread from, so only a node below
// small_group_fraction of the median (default: half speed) is called slow.
//
// With confirmation on (the default; confirmation.h), a sweep's first figures never condemn a
// node for speed: on a shared or loaded machine one unlucky moment can put a healthy node under
// half its peers' median, even beside its neighbours. Every node below its peers is a suspect,
// measured again between peers until a sequential test decides; the rules above are then not
// used for compute stress. Only the first measurements (step 0) count here either way.
//
// A check that could not be made at all — the node's worker was not connected to the scheduler
// when it was dispatched — is recorded without a verdict (NotMeasured). It is no evidence about
// the node's hardware: whether the node is lost is its lease's to decide, not a sweep's. Such a
// node is neither condemned nor a peer for that check, an all-reduce group with it is not
// judged, and the sweep lists the node as not measured (UnmeasuredNodes).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "healthcheck/confirmation.h"
#include "tessera/v1/health.pb.h"

namespace tessera::health {

struct AnomalyConfig {
  double slow_fraction = 0.85;
  double mad_k = 5.0;
  double neighbour_fraction = 0.9;
  double small_group_fraction = 0.5;
  int min_nodes_for_spread = 4;
  ConfirmationConfig confirmation;
};

struct Anomaly {
  std::string node;
  v1::HealthVerdict verdict = v1::HEALTH_VERDICT_UNSPECIFIED;
  // "node-2: compute 0.31 TFLOP/s, 0.29 x the median 1.07 of 3 nodes"
  std::string finding;
  std::map<std::string, double> evidence;
};

// One all-reduce group's outcome: bad when a member's check failed or is missing (the verdict
// says which), or when its busbw at the largest payload is far below the groups' median (SLOW).
struct GroupJudgement {
  bool bad = false;
  // False when a member could not be reached (NotMeasured): the group says nothing either way.
  bool measured = true;
  v1::HealthVerdict verdict = v1::HEALTH_VERDICT_PASSED;
  // For a bad group: "node-c reported ERROR: ...", "busbw 0.2 GB/s, ..."; for an unmeasured one,
  // which member was not reached and why.
  std::string why;
};
std::vector<GroupJudgement> JudgeGroups(const std::vector<std::vector<std::string>>& groups,
                                        const std::vector<v1::HealthCheckResult>& results,
                                        const AnomalyConfig& config);

// `results` holds the sweep's results (several per node); `groups` the all-reduce groups.
// Nodes without a compute result are TIMEOUT; so are group members without an all-reduce one.
std::vector<Anomaly> FindAnomalies(const std::vector<std::string>& nodes,
                                   const std::vector<std::vector<std::string>>& groups,
                                   const std::vector<v1::HealthCheckResult>& results,
                                   const AnomalyConfig& config);

// A check the sweep could not make: the canary could not be handed to the node's worker (not
// connected to the scheduler). Recorded with no verdict (HEALTH_VERDICT_UNSPECIFIED).
bool NotMeasured(const v1::HealthCheckResult& result);

// The nodes of `nodes` with a check that could not be made (NotMeasured), each with the first
// such check's error.
std::map<std::string, std::string> UnmeasuredNodes(
    const std::vector<std::string>& nodes, const std::vector<v1::HealthCheckResult>& results);

// The prefix of a sweep's findings about a node it could not measure ("not measured: NODE: ...").
// Such a sweep is not a pass for the node (Remediation::ReturnToService).
inline constexpr char kNotMeasuredPrefix[] = "not measured: ";
bool NotMeasuredIn(const v1::Sweep& sweep, const std::string& node);

// A suspect the confirmation found slow, or at a clear fault, as the anomaly to remediate, with
// every pair of measurements and the test's figures as evidence; nothing for a cleared or
// undecided one.
std::optional<Anomaly> ConfirmedAnomaly(const std::string& node, const SuspectOutcome& outcome);

// What a finished sweep's confirmation does with each suspect.
struct ConfirmationVerdicts {
  // To remediate: clear faults (a peer's too), slowness beyond repeat_above, and slowness found
  // again by a follow-up sweep (with the earlier sweep's figures in its finding and evidence).
  std::vector<Anomaly> anomalies;
  // Found slow for speed alone by this sweep only: measured again by a follow-up sweep.
  std::vector<std::string> repeat;
  // Neither cleared nor condemned: out of pairs, or the sweep ended early.
  std::vector<std::string> inconclusive;
};
// `earlier`: the confirmation of the sweep this one follows up (null for a first sweep). A node
// that needs a repeat (NeedsRepeat) is condemned only when `earlier` found it slow too, or left
// it inconclusive (then its pairs count in this verdict: the evidence spans two sweeps).
ConfirmationVerdicts JudgeConfirmation(const ConfirmationPlan& plan,
                                       const ConfirmationPlan* earlier,
                                       const ConfirmationConfig& config);

// When some node was measured more than once, one after another (nodes sharing a machine): each
// first (step 0) passing compute measurement of `nodes` over the median of the (up to) two
// measurements of other nodes taken just before and the two just after it, by node in time
// order. Empty otherwise (each node measured once, at the same time as the others: nothing to
// correct for).
std::map<std::string, std::vector<double>> NeighbourRatios(
    const std::vector<v1::HealthCheckResult>& results, const std::vector<std::string>& nodes);

// Median and median absolute deviation; a normal distribution's sigma is kMadToSigma x its MAD.
inline constexpr double kMadToSigma = 1.4826;
double Median(std::vector<double> values);
double MedianAbsoluteDeviation(const std::vector<double>& values, double median);
// exp of the mean log; 1 for none. Values must be > 0.
double GeometricMean(const std::vector<double>& values);

}  // namespace tessera::health
