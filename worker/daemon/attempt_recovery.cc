// A worker restarted on the state folder of its previous incarnation: the ranks that one left
// are killed (a pid is trusted only with its recorded start time) and their attempts reported
// LOST, with whatever they printed still shipped. Apart from attempt_manager.cc, which starts,
// watches and stops the ranks of this incarnation.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/daemon/attempt_manager.h"
#include "worker/daemon/rank_secrets.h"

namespace tessera::worker {

int AttemptManager::CleanUpPreviousIncarnation() {
  std::vector<std::string> problems;
  auto found = records_.LoadAll(&problems);
  for (const auto& p : problems) spdlog::warn("unreadable attempt record {}", p);
  int killed_total = 0;
  for (const auto& record : found) {
    auto killed = KillRecordedRanks(record);
    killed_total += static_cast<int>(killed.size());
    spdlog::warn("run {} attempt {}: killed {} rank(s) left by the previous worker", record.run_id,
                 record.resumption_index, killed.size());
    Attempt a;
    a.start.set_run_id(record.run_id);
    a.start.set_run_name(record.run_name);
    a.start.set_resumption_index(record.resumption_index);
    a.start.set_node_rank(record.node_rank);
    a.paths = PathsFor(options_.state_dir, record.run_id, record.resumption_index);
    a.lost = true;
    a.ended_at = clock_->Now();
    v1::AttemptUpdate u;
    u.set_run_id(record.run_id);
    u.set_resumption_index(record.resumption_index);
    u.set_phase(v1::ATTEMPT_PHASE_LOST);
    u.set_detail(absl::StrCat("the worker on ", options_.node_name, " restarted and killed ",
                              killed.size(), " rank(s) of its previous incarnation"));
    for (const auto& rank : record.ranks) {
      const bool was_running = std::find(killed.begin(), killed.end(), rank.rank) != killed.end();
      ExitInfo info;
      if (was_running) info.signal = SIGKILL;
      *u.add_rank_exits() = ExitOf(a, rank.rank, info);
      a.exits.push_back(u.rank_exits(u.rank_exits_size() - 1));
      a.reported[rank.rank] = true;
      // Whatever they printed is still shipped.
      on_output_(OutputOf(a, rank.rank));
      on_rank_done_(OutputOf(a, rank.rank));
    }
    (void)records_.Remove(record.run_id, record.resumption_index);
    RemoveSecretFiles(a.paths);
    absl::MutexLock lock(&mu_);
    Queue(std::move(u));
    attempts_[{record.run_id, record.resumption_index}] = std::move(a);
  }
  return killed_total;
}

}  // namespace tessera::worker
