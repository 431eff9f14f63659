#include "scheduler/service/attempt_tracker.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace tessera::scheduler {
namespace {

bool IsFailure(const v1::RankExit& e) { return e.exit_code() != 0 || e.signal() != 0; }

bool AllFinished(const v1::Run& run, const AttemptState& s) {
  for (const auto& n : run.nodes()) {
    if (!s.finished.count(n.node_name())) return false;
  }
  return true;
}

}  // namespace

AttemptTracker::AttemptTracker(std::shared_ptr<Clock> clock, absl::Duration drain_limit)
    : clock_(std::move(clock)), drain_limit_(drain_limit) {}

void AttemptTracker::SetActive(const std::vector<v1::Run>& active) {
  absl::MutexLock lock(&mu_);
  active_.clear();
  for (const auto& r : active) active_[r.id()] = r;
  std::erase_if(attempts_, [&](const auto& kv) {
    auto it = active_.find(kv.first.first);
    return it == active_.end() || it->second.resumption_index() != kv.first.second;
  });
  // An attempt this instance did not place (a new leader's) is taken to start when first seen.
  const absl::Time now = clock_->Now();
  for (const auto& r : active) placed_at_.try_emplace({r.id(), r.resumption_index()}, now);
  std::erase_if(placed_at_, [&](const auto& kv) {
    auto it = active_.find(kv.first.first);
    return it == active_.end() || it->second.resumption_index() != kv.first.second;
  });
}

absl::Time AttemptTracker::PlacedAt(const std::string& run_id, int resumption) const {
  absl::MutexLock lock(&mu_);
  auto it = placed_at_.find({run_id, resumption});
  return it == placed_at_.end() ? clock_->Now() : it->second;
}

void AttemptTracker::LearnActive(const std::vector<v1::Run>& active) {
  absl::MutexLock lock(&mu_);
  for (const auto& r : active) active_.emplace(r.id(), r);
}

bool AttemptTracker::IsActive(const std::string& run_id) const {
  absl::MutexLock lock(&mu_);
  return active_.count(run_id) > 0;
}

std::optional<v1::Run> AttemptTracker::ActiveRun(const std::string& run_id, int resumption) const {
  absl::MutexLock lock(&mu_);
  auto it = active_.find(run_id);
  if (it == active_.end() || it->second.resumption_index() != resumption) return std::nullopt;
  return it->second;
}

std::optional<v1::Run> AttemptTracker::ActiveRunNamed(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, run] : active_) {
    if (run.name() == name) return run;
  }
  return std::nullopt;
}

AttemptState AttemptTracker::State(const std::string& run_id, int resumption) const {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find({run_id, resumption});
  return it == attempts_.end() ? AttemptState{} : it->second;
}

bool AttemptTracker::StopSent(const std::string& run_id, int resumption) const {
  return StopSentAt(run_id, resumption).has_value();
}

std::optional<absl::Time> AttemptTracker::StopSentAt(const std::string& run_id,
                                                     int resumption) const {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find({run_id, resumption});
  if (it == attempts_.end() || it->second.stop_sent_at == absl::InfinitePast()) return std::nullopt;
  return it->second.stop_sent_at;
}

bool AttemptTracker::Superseded(const std::string& run_id, int resumption) const {
  absl::MutexLock lock(&mu_);
  auto run = active_.find(run_id);
  if (run != active_.end() && run->second.resumption_index() > resumption) return true;
  auto draining = draining_.find(run_id);
  return draining != draining_.end() && draining->second.run.resumption_index() == resumption;
}

std::optional<AttemptTracker::NodeReports> AttemptTracker::ReportsFrom(
    const std::string& run_id, int resumption, const std::string& node) const {
  absl::MutexLock lock(&mu_);
  auto run = active_.find(run_id);
  if (run == active_.end() || run->second.resumption_index() != resumption) return std::nullopt;
  NodeReports out;
  if (auto it = attempts_.find({run_id, resumption}); it != attempts_.end()) {
    out.started = it->second.started.count(node) > 0;
    out.finished = it->second.finished.count(node) > 0;
  }
  return out;
}

bool AttemptTracker::PlacedOn(const std::string& run_id, int resumption,
                              const std::string& node) const {
  absl::MutexLock lock(&mu_);
  auto run = active_.find(run_id);
  if (run == active_.end() || run->second.resumption_index() != resumption) return false;
  for (const auto& n : run->second.nodes()) {
    if (n.node_name() == node) return true;
  }
  return false;
}

void AttemptTracker::Placed(const v1::Run& run) {
  absl::MutexLock lock(&mu_);
  active_[run.id()] = run;
  placed_at_[{run.id(), run.resumption_index()}] = clock_->Now();
  ++placements_total_;
}

int64_t AttemptTracker::placements_total() const {
  absl::MutexLock lock(&mu_);
  return placements_total_;
}

absl::StatusOr<AttemptReport> AttemptTracker::Record(const std::string& node,
                                                     const v1::AttemptUpdate& update) {
  absl::MutexLock lock(&mu_);
  AttemptReport out;
  auto it = active_.find(update.run_id());
  if (it == active_.end() || it->second.resumption_index() != update.resumption_index()) {
    // An attempt that already ended: nothing left to decide, except that its ranks are gone.
    if (update.phase() != v1::ATTEMPT_PHASE_STARTED &&
        update.phase() != v1::ATTEMPT_PHASE_RANK_EXITED) {
      NodeDrainedLocked(update.run_id(), update.resumption_index(), node);
      out.effect = AttemptReport::Effect::kDrained;
    }
    return out;
  }
  const v1::Run& run = it->second;
  // A node reports only for attempts placed on it: another node's worker (or an impostor's
  // stream) must not start, finish or fail them.
  bool placed_here = false;
  for (const auto& n : run.nodes()) placed_here = placed_here || n.node_name() == node;
  if (!placed_here) {
    return absl::PermissionDeniedError(
        absl::StrCat("node ", node, " reported on attempt ", update.resumption_index(), " of run ",
                     update.run_id(), ", which was not placed on it"));
  }
  AttemptState& s = attempts_[{update.run_id(), update.resumption_index()}];
  switch (update.phase()) {
    case v1::ATTEMPT_PHASE_STARTED:
      out.first_start = s.started.empty();
      s.started.insert(node);
      break;
    case v1::ATTEMPT_PHASE_LOST:
      // Not the user's failure: the ranks died with their worker. Recorded as exits, never as
      // the first failed rank.
      for (const auto& e : update.rank_exits()) s.exits.push_back(e);
      s.finished.insert(node);
      out.all_finished = AllFinished(run, s);
      break;
    case v1::ATTEMPT_PHASE_RANK_EXITED:
    case v1::ATTEMPT_PHASE_FINISHED:
    case v1::ATTEMPT_PHASE_START_FAILED:
      for (const auto& e : update.rank_exits()) {
        s.exits.push_back(e);
        if (IsFailure(e) && s.first_failed_rank < 0 &&
            s.stop_reason == v1::ATTEMPT_END_REASON_UNSPECIFIED) {
          s.first_failed_rank = e.rank();
          s.first_failed_node = node;
          s.control_plane_fault = e.control_plane_fault();
          out.newly_failed = true;
        }
      }
      if (update.phase() == v1::ATTEMPT_PHASE_START_FAILED && s.first_failed_node.empty()) {
        s.first_failed_node = node;
        out.newly_failed = true;
      }
      if (update.phase() != v1::ATTEMPT_PHASE_RANK_EXITED) s.finished.insert(node);
      out.all_finished = AllFinished(run, s);
      break;
    default:
      return absl::InvalidArgumentError("attempt_update.phase: required");
  }
  out.effect = AttemptReport::Effect::kRecorded;
  out.run = run;
  out.state = s;
  return out;
}

bool AttemptTracker::MarkStopping(const std::string& run_id, int resumption,
                                  v1::AttemptEndReason why, const std::string& detail,
                                  const std::string& node, v1::DetectionMethod how) {
  absl::MutexLock lock(&mu_);
  auto& state = attempts_[{run_id, resumption}];
  if (state.stop_sent_at != absl::InfinitePast()) return false;
  state.stop_sent_at = clock_->Now();
  const bool blames_node = !node.empty() && how != v1::DETECTION_METHOD_UNSPECIFIED;
  if (why == v1::ATTEMPT_END_REASON_STOPPED || why == v1::ATTEMPT_END_REASON_PREEMPTED ||
      why == v1::ATTEMPT_END_REASON_RESIZED || blames_node) {
    state.stop_reason = why;
    state.stop_detail = detail;
  }
  if (blames_node) {
    state.stop_node = node;
    state.stop_detection = how;
  }
  return true;
}

void AttemptTracker::Ended(const std::string& run_id, int resumption,
                           const std::set<std::string>& finished_before, bool succeeded) {
  absl::MutexLock lock(&mu_);
  // Reports may have arrived since the caller copied the books (a stop answered at once).
  std::set<std::string> finished = finished_before;
  if (auto st = attempts_.find({run_id, resumption}); st != attempts_.end()) {
    finished.insert(st->second.finished.begin(), st->second.finished.end());
  }
  attempts_.erase({run_id, resumption});
  if (auto it = active_.find(run_id); it != active_.end() && !succeeded) {
    DrainingAttempt d{it->second, clock_->Now() + drain_limit_};
    d.run.clear_nodes();
    for (const auto& n : it->second.nodes()) {
      if (!finished.count(n.node_name())) *d.run.add_nodes() = n;
    }
    if (d.run.nodes_size() > 0) draining_[run_id] = std::move(d);
  }
  active_.erase(run_id);
}

void AttemptTracker::NodeDrained(const std::string& run_id, int resumption,
                                 const std::string& node) {
  absl::MutexLock lock(&mu_);
  NodeDrainedLocked(run_id, resumption, node);
}

void AttemptTracker::NodeDrainedLocked(const std::string& run_id, int resumption,
                                       const std::string& node) {
  auto it = draining_.find(run_id);
  if (it == draining_.end() || it->second.run.resumption_index() != resumption) return;
  auto* nodes = it->second.run.mutable_nodes();
  for (int i = 0; i < nodes->size(); ++i) {
    if (nodes->Get(i).node_name() == node) {
      nodes->DeleteSubrange(i, 1);
      break;
    }
  }
  if (nodes->empty()) draining_.erase(it);
}

void AttemptTracker::NodeLost(const std::string& node) {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, int>> affected;
  for (const auto& [id, d] : draining_) affected.emplace_back(id, d.run.resumption_index());
  for (const auto& [id, k] : affected) NodeDrainedLocked(id, k, node);
}

std::vector<v1::Run> AttemptTracker::Draining() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  std::vector<v1::Run> out;
  for (auto it = draining_.begin(); it != draining_.end();) {
    if (now >= it->second.give_up) {
      spdlog::warn("run {}: nodes never confirmed that attempt {} stopped; placing it again",
                   it->first, it->second.run.resumption_index());
      it = draining_.erase(it);
      continue;
    }
    out.push_back(it->second.run);
    ++it;
  }
  return out;
}

}  // namespace tessera::scheduler
