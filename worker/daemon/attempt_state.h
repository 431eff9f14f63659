// What the worker knows of one attempt on this node: its command, its folders, its rank
// processes and how they ended, and whether it was stopped, fenced, lost or is still being
// prepared. AttemptManager keeps one per attempt; the functions here turn it into what the
// control plane and the log shipper are told.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tessera/v1/worker.pb.h"
#include "worker/common/rank_output.h"
#include "worker/daemon/rank_environment.h"
#include "worker/daemon/rank_launcher.h"

namespace tessera::worker {

struct AttemptState {
  v1::StartAttempt start;
  AttemptPaths paths;
  std::vector<std::unique_ptr<RankProcess>> procs;
  std::vector<v1::RankExit> exits;
  std::map<int, bool> reported;  // rank -> exit reported
  bool lost = false;
  bool fenced = false;       // its ranks were killed for want of a lease
  bool stopped = false;      // the control plane stopped it
  bool preparing = false;    // its image is being pulled; no rank yet
  bool cancelled = false;    // stopped (or fenced) while preparing: never launched
  std::string image_digest;  // in use while the attempt runs
  std::optional<absl::Time> ended_at;
  std::optional<uid_t> rendezvous_owner;  // its rendezvous port is walled for others' ranks
};

// How rank `rank` of the attempt ended, as the control plane is told: a kill by the fence, or
// an end the worker could not learn, is Tessera's fault and not the run's.
v1::RankExit ExitOf(const AttemptState& a, const std::string& node_name, int rank,
                    const ExitInfo& info);

// The files the log shipper reads for rank `rank`. Under a node's launcher every local rank is
// a process of the launcher's and the launcher's files are the first rank's alone.
RankOutput OutputOf(const AttemptState& a, int rank);

// The ranks a process of the attempt stands for: itself, or every local rank for a node's
// launcher.
std::vector<int> RanksOf(const AttemptState& a, int process_rank);

// An update about the attempt, with its run and resumption filled in.
v1::AttemptUpdate UpdateFor(const v1::StartAttempt& start, v1::AttemptPhase phase,
                            const std::string& detail);

}  // namespace tessera::worker
