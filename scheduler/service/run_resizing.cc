#include "scheduler/service/run_resizing.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"

namespace tessera::scheduler {

RunResizing::RunResizing(std::shared_ptr<Clock> clock, absl::Duration shrink_after)
    : clock_(std::move(clock)), shrink_after_(shrink_after) {}

absl::Duration RunResizing::UntilShrinkable(const v1::Run& run) const {
  const v1::ComputeSpec& compute = run.spec().compute();
  if (compute.min_nodes() <= 0 || compute.min_nodes() >= compute.nodes()) {
    return absl::InfiniteDuration();
  }
  // Only a resumption: its checkpoint is resharded onto the nodes it gets. A first attempt
  // waits for all of them, as any run does.
  if (run.resumption_index() <= 0) return absl::InfiniteDuration();
  const absl::Time queued_since =
      run.has_updated_at() ? FromProtoTime(run.updated_at()) : absl::InfinitePast();
  return std::max(absl::ZeroDuration(), shrink_after_ - (clock_->Now() - queued_since));
}

int RunResizing::MinNodesNow(const v1::Run& run) const {
  return UntilShrinkable(run) == absl::ZeroDuration() ? run.spec().compute().min_nodes() : 0;
}

std::string RunResizing::QueueNote(const v1::Run& run) const {
  const absl::Duration until = UntilShrinkable(run);
  if (until == absl::InfiniteDuration()) return "";
  const v1::ComputeSpec& compute = run.spec().compute();
  const std::string fewer = absl::StrCat("as few as ", compute.min_nodes(), " of its ",
                                         compute.nodes(), " nodes (compute.min_nodes)");
  if (until == absl::ZeroDuration()) return absl::StrCat("; it starts on ", fewer, " once free");
  return absl::StrCat("; it may start on ", fewer, " in ",
                      absl::FormatDuration(absl::Ceil(until, absl::Seconds(1))));
}

std::string RunResizing::PlacementNote(const v1::Run& run, int placed_nodes) const {
  const std::string on = PlacedOn(run, placed_nodes);
  if (on.empty()) return "";
  return absl::StrCat("Resumed ", on, ": not all of them came free within ",
                      absl::FormatDuration(shrink_after_),
                      " of its requeue; it grows back after a checkpoint once they are");
}

std::string RunResizing::PlacedOn(const v1::Run& run, int placed_nodes) {
  const v1::ComputeSpec& compute = run.spec().compute();
  if (compute.min_nodes() <= 0 || placed_nodes >= compute.nodes()) return "";
  return absl::StrCat("on ", placed_nodes, " of its ", compute.nodes(),
                      " nodes (compute.min_nodes is ", compute.min_nodes(), ")");
}

std::vector<RunResizing::Growth> RunResizing::DueToGrow(
    const std::vector<v1::Run>& active, const std::function<bool(const v1::Run&)>& can_grow) {
  std::vector<Growth> due;
  std::set<std::string> shrunk;
  for (const v1::Run& run : active) {
    if (run.status() != v1::RUN_STATUS_RUNNING || !RunsShrunk(run)) continue;
    if (run.progress().checkpoint_step() <= 0 && run.progress().checkpoint_interval_steps() <= 0) {
      continue;  // no checkpoints to grow at
    }
    if (!can_grow(run)) continue;
    shrunk.insert(run.id());
    const int64_t checkpoint = run.progress().checkpoint_step();
    const auto [it, first] = waiting_for_checkpoint_.emplace(run.id(), checkpoint);
    if (first || checkpoint <= it->second) continue;
    due.push_back({&run, absl::StrCat("all ", run.spec().compute().nodes(),
                                      " of its nodes are free again; stopped right after its "
                                      "checkpoint of step ",
                                      checkpoint, " to resume on all of them")});
  }
  // A run that stopped being shrunk, running or able to grow starts over.
  std::erase_if(waiting_for_checkpoint_,
                [&](const auto& entry) { return !shrunk.count(entry.first); });
  for (const Growth& g : due) waiting_for_checkpoint_.erase(g.run->id());
  return due;
}

bool RunsShrunk(const v1::Run& run) {
  const v1::ComputeSpec& compute = run.spec().compute();
  return compute.min_nodes() > 0 && run.nodes_size() > 0 && run.nodes_size() < compute.nodes();
}

}  // namespace tessera::scheduler
