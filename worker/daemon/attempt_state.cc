#include "worker/daemon/attempt_state.h"

namespace tessera::worker {

v1::RankExit ExitOf(const AttemptState& a, const std::string& node_name, int rank,
                    const ExitInfo& info) {
  v1::RankExit e;
  e.set_rank(rank);
  e.set_node_rank(a.start.node_rank());
  e.set_node_name(node_name);
  e.set_exit_code(info.signaled() ? 128 + info.signal : info.exit_code);
  e.set_signal(info.signal);
  e.set_control_plane_fault(info.status_lost || (a.fenced && info.signaled()));
  return e;
}

RankOutput OutputOf(const AttemptState& a, int rank) {
  const bool launcher = LaunchesPerNode(a.start);
  pid_t pid = 0;
  for (const auto& p : a.procs) {
    if (p->rank() == rank || launcher) pid = p->pid();
  }
  const bool own_output = !launcher || rank == a.start.first_rank();
  return RankOutput{a.start.run_id(),
                    a.start.resumption_index(),
                    a.start.node_rank(),
                    rank,
                    own_output ? RankLogPath(a.paths, rank, "stdout") : "",
                    own_output ? RankLogPath(a.paths, rank, "stderr") : "",
                    RankProgressPath(a.paths, rank),
                    absl::Seconds(a.start.hang_timeout_seconds()),
                    pid};
}

std::vector<int> RanksOf(const AttemptState& a, int process_rank) {
  if (!LaunchesPerNode(a.start)) return {process_rank};
  std::vector<int> ranks;
  for (int i = 0; i < a.start.local_world_size(); ++i) ranks.push_back(a.start.first_rank() + i);
  return ranks;
}

v1::AttemptUpdate UpdateFor(const v1::StartAttempt& start, v1::AttemptPhase phase,
                            const std::string& detail) {
  v1::AttemptUpdate u;
  u.set_run_id(start.run_id());
  u.set_resumption_index(start.resumption_index());
  u.set_phase(phase);
  u.set_detail(detail);
  return u;
}

}  // namespace tessera::worker
