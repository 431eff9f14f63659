#include "worker/daemon/previous_incarnation.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/daemon/rank_secrets.h"

namespace tessera::worker {

std::vector<LostAttempt> KillPreviousIncarnation(AttemptRecords& records,
                                                 const std::string& state_dir,
                                                 const std::string& node_name, absl::Time now) {
  std::vector<std::string> problems;
  auto found = records.LoadAll(&problems);
  for (const auto& p : problems) spdlog::warn("unreadable attempt record {}", p);
  std::vector<LostAttempt> lost;
  for (const auto& record : found) {
    const std::vector<int> killed = KillRecordedRanks(record);
    spdlog::warn("run {} attempt {}: killed {} rank(s) left by the previous worker", record.run_id,
                 record.resumption_index, killed.size());
    LostAttempt l;
    l.killed = static_cast<int>(killed.size());
    AttemptState& a = l.attempt;
    a.start.set_run_id(record.run_id);
    a.start.set_run_name(record.run_name);
    a.start.set_resumption_index(record.resumption_index);
    a.start.set_node_rank(record.node_rank);
    a.paths = PathsFor(state_dir, record.run_id, record.resumption_index);
    a.lost = true;
    a.ended_at = now;
    l.update = UpdateFor(a.start, v1::ATTEMPT_PHASE_LOST,
                         absl::StrCat("the worker on ", node_name, " restarted and killed ",
                                      killed.size(), " rank(s) of its previous incarnation"));
    for (const auto& rank : record.ranks) {
      ExitInfo info;
      if (std::find(killed.begin(), killed.end(), rank.rank) != killed.end()) {
        info.signal = SIGKILL;
      }
      a.exits.push_back(ExitOf(a, node_name, rank.rank, info));
      *l.update.add_rank_exits() = a.exits.back();
      a.reported[rank.rank] = true;
    }
    (void)records.Remove(record.run_id, record.resumption_index);
    RemoveSecretFiles(a.paths);
    lost.push_back(std::move(l));
  }
  return lost;
}

}  // namespace tessera::worker
