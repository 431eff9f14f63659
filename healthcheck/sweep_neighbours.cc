#include "healthcheck/sweep_neighbours.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"

namespace tessera::health {

void SweepNeighbours::Observe(const v1::Sweep& sweep) {
  auto running = runs_->ListRunning();
  if (!running.ok()) return;
  // The user of the run the sweep is for: its runs are what the sweep measures, not neighbours.
  std::optional<std::string> own_user;
  for (const v1::Run& run : *running) {
    if (!sweep.run_name().empty() && run.name() == sweep.run_name()) own_user = run.user();
  }
  // Where they are not: the nodes that run held when the sweep was made (its suspect among
  // them); everywhere for a sweep stored before it said which.
  std::set<std::string> own_nodes(sweep.run_nodes().begin(), sweep.run_nodes().end());
  if (!sweep.suspect_node().empty()) own_nodes.insert(sweep.suspect_node());
  const bool own_everywhere = sweep.run_nodes().empty();
  absl::MutexLock lock(&mu_);
  auto& seen = seen_[sweep.id()];
  for (const v1::Run& run : *running) {
    const bool own = run.name() == sweep.run_name() || (own_user && run.user() == *own_user);
    for (const auto& placed : run.nodes()) {
      const auto& nodes = sweep.node_names();
      if (std::find(nodes.begin(), nodes.end(), placed.node_name()) == nodes.end()) continue;
      if (own && (own_everywhere || own_nodes.count(placed.node_name()))) continue;
      seen[placed.node_name()].insert(absl::StrCat(run.name(), " (", run.user(), ")"));
    }
  }
}

std::set<std::string> SweepNeighbours::On(const v1::Sweep& sweep, const std::string& node) {
  absl::MutexLock lock(&mu_);
  auto it = seen_.find(sweep.id());
  if (it == seen_.end()) return {};
  auto runs = it->second.find(node);
  return runs == it->second.end() ? std::set<std::string>{} : runs->second;
}

void SweepNeighbours::Forget(const std::string& sweep_id) {
  absl::MutexLock lock(&mu_);
  seen_.erase(sweep_id);
}

}  // namespace tessera::health
