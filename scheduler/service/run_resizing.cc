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

std::string RunResizing::Placed(const v1::Run& run, int placed_nodes) {
  const std::string on = PlacedOn(run, placed_nodes);
  if (on.empty()) return "";
  const absl::Time now = clock_->Now();
  const auto grown = growths_.find(run.id());
  if (grown != growths_.end()) {
    Growths& g = grown->second;
    // Only a loss since it last grew back counts; a shrunk run losing another node is not a flap.
    if (g.last_grown > g.last_shrunk) g.flaps = now - g.last_grown < kFlapWindow ? g.flaps + 1 : 0;
    g.last_shrunk = now;
  }
  const std::string note = absl::StrCat("Resumed ", on, ": not all of them came free within ",
                                        absl::FormatDuration(shrink_after_), " of its requeue");
  const absl::Duration delay = RegrowDelay(run.id());
  if (delay == absl::ZeroDuration()) {
    return absl::StrCat(note, "; it grows back after a checkpoint once they are");
  }
  const int flaps = grown->second.flaps;  // a delay means it has grown
  return absl::StrCat(note, "; it lost a node within ", absl::FormatDuration(kFlapWindow),
                      " of growing back ", flaps, flaps == 1 ? " time" : " times",
                      ", so it grows back after a checkpoint once they have stayed free for ",
                      absl::FormatDuration(delay));
}

absl::Duration RunResizing::RegrowDelay(const std::string& run_id) const {
  const auto grown = growths_.find(run_id);
  if (grown == growths_.end() || grown->second.flaps == 0) return absl::ZeroDuration();
  absl::Duration delay = shrink_after_;
  for (int i = 0; i < grown->second.flaps && delay < kMaxRegrowDelay; ++i) delay *= 2;
  return std::min(delay, kMaxRegrowDelay);
}

std::string RunResizing::PlacedOn(const v1::Run& run, int placed_nodes) {
  const v1::ComputeSpec& compute = run.spec().compute();
  if (compute.min_nodes() <= 0 || placed_nodes >= compute.nodes()) return "";
  return absl::StrCat("on ", placed_nodes, " of its ", compute.nodes(),
                      " nodes (compute.min_nodes is ", compute.min_nodes(), ")");
}

std::vector<RunResizing::Growth> RunResizing::DueToGrow(
    const std::vector<v1::Run>& active, const std::function<bool(const v1::Run&)>& can_grow) {
  const absl::Time now = clock_->Now();
  std::vector<Growth> due;
  std::set<std::string> shrunk, waiting;
  for (const v1::Run& run : active) {
    if (run.status() != v1::RUN_STATUS_RUNNING || !RunsShrunk(run)) continue;
    shrunk.insert(run.id());
    if (run.progress().checkpoint_step() <= 0 && run.progress().checkpoint_interval_steps() <= 0) {
      continue;  // no checkpoints to grow at
    }
    if (!can_grow(run)) continue;
    waiting.insert(run.id());
    const int64_t checkpoint = run.progress().checkpoint_step();
    const auto [it, first] = waiting_for_checkpoint_.emplace(run.id(), Waiting{checkpoint, now});
    const absl::Duration delay = RegrowDelay(run.id());
    // A flapping run's checkpoint must come after its nodes have stayed free long enough.
    if (now - it->second.free_since < delay) it->second.checkpoint = checkpoint;
    if (first || checkpoint <= it->second.checkpoint) continue;
    const std::string stayed =
        delay > absl::ZeroDuration()
            ? absl::StrCat(" (and stayed free for ", absl::FormatDuration(delay),
                           ": it lost a node soon after growing back before)")
            : "";
    due.push_back(
        {&run, absl::StrCat("all ", run.spec().compute().nodes(), " of its nodes are free again",
                            stayed, "; stopped right after its checkpoint of step ", checkpoint,
                            " to resume on all of them")});
  }
  // A run that stopped being shrunk, running or able to grow starts over.
  std::erase_if(waiting_for_checkpoint_,
                [&](const auto& entry) { return !waiting.count(entry.first); });
  for (const Growth& g : due) {
    waiting_for_checkpoint_.erase(g.run->id());
    growths_[g.run->id()].last_grown = now;
  }
  // What is remembered of growths goes once it no longer matters: past the window, and the run
  // not shrunk now (a run that ended, or stayed whole).
  std::erase_if(growths_, [&](const auto& entry) {
    const Growths& g = entry.second;
    return !shrunk.count(entry.first) && now - std::max(g.last_grown, g.last_shrunk) > kFlapWindow;
  });
  return due;
}

bool RunsShrunk(const v1::Run& run) {
  const v1::ComputeSpec& compute = run.spec().compute();
  return compute.min_nodes() > 0 && run.nodes_size() > 0 && run.nodes_size() < compute.nodes();
}

}  // namespace tessera::scheduler
