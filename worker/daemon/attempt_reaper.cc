#include "worker/daemon/attempt_reaper.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>

#include "worker/daemon/worker_metrics.h"

namespace tessera::worker {

AttemptReaper::AttemptReaper(std::string node_name, std::shared_ptr<const RankSandbox> sandbox)
    : node_name_(std::move(node_name)), sandbox_(std::move(sandbox)) {}

AttemptReaper::Reaped AttemptReaper::Reap(AttemptState& a) const {
  Reaped r;
  v1::AttemptUpdate u;
  bool all_exited = true;
  for (auto& p : a.procs) {
    if (!p->Poll()) {
      all_exited = false;
      continue;
    }
    if (a.reported[p->rank()]) continue;
    a.reported[p->rank()] = true;
    const auto note = sandbox_ ? sandbox_->OutOfMemoryNote(a.start, p->rank()) : std::nullopt;
    if (note) std::ofstream(RankLogPath(a.paths, p->rank(), "stderr"), std::ios::app) << *note;
    WorkerEventMetrics::Default().RankExited(
        ClassifyRankExit(*p->exit(), a.stopped, a.fenced, note.has_value()));
    *u.add_rank_exits() = ExitOf(a, node_name_, p->rank(), *p->exit());
    a.exits.push_back(u.rank_exits(u.rank_exits_size() - 1));
    for (const int rank : RanksOf(a, p->rank())) r.done.push_back(OutputOf(a, rank));
    spdlog::info("run {} attempt {}: rank {} {}", a.start.run_id(), a.start.resumption_index(),
                 p->rank(), p->exit()->ToString());
  }
  r.ended = all_exited;
  if (u.rank_exits_size() > 0 || (all_exited && !a.procs.empty())) {
    u.set_run_id(a.start.run_id());
    u.set_resumption_index(a.start.resumption_index());
    u.set_phase(r.ended ? v1::ATTEMPT_PHASE_FINISHED : v1::ATTEMPT_PHASE_RANK_EXITED);
    r.update = std::move(u);
  }
  if (r.ended) {
    for (const auto& p : a.procs) {
      for (const int rank : RanksOf(a, p->rank())) r.outputs.push_back(OutputOf(a, rank));
    }
  }
  return r;
}

void AttemptReaper::Gather(const AttemptState& ended, Leftovers& into) const {
  if (!ended.image_digest.empty()) into.image_digests.push_back(ended.image_digest);
  if (ended.rendezvous_owner) {
    into.rendezvous_walls.emplace_back(ended.start.master_port(), *ended.rendezvous_owner);
  }
  for (const auto& p : ended.procs) {
    into.cgroups.push_back(RankSandbox::CgroupName(ended.start, p->rank()));
  }
  const bool all_clean = std::all_of(ended.procs.begin(), ended.procs.end(), [](const auto& p) {
    return !p->exit()->signaled() && !p->exit()->status_lost && p->exit()->exit_code == 0;
  });
  if (!ended.stopped && !ended.fenced && all_clean)
    into.trained_runs.push_back(ended.start.run_id());
}

}  // namespace tessera::worker
