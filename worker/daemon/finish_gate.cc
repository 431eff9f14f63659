#include "worker/daemon/finish_gate.h"

#include <spdlog/spdlog.h>

namespace tessera::worker {

FinishGate::FinishGate(std::function<bool(const RankOutput&)> shipped, absl::Duration max_wait)
    : shipped_(std::move(shipped)), max_wait_(max_wait) {}

void FinishGate::Hold(v1::AttemptUpdate finished, std::vector<RankOutput> outputs,
                      absl::Time ended_at) {
  std::pair<std::string, int> key{finished.run_id(), finished.resumption_index()};
  held_[std::move(key)] = Held{std::move(finished), std::move(outputs), ended_at};
}

bool FinishGate::AllShipped(const Held& held) const {
  for (const auto& output : held.outputs) {
    if (!shipped_(output)) return false;
  }
  return true;
}

std::vector<v1::AttemptUpdate> FinishGate::Release(absl::Time now) {
  std::vector<v1::AttemptUpdate> released;
  for (auto it = held_.begin(); it != held_.end();) {
    Held& held = it->second;
    const absl::Duration waited = now - held.ended_at;
    const bool shipped = AllShipped(held);
    if (!shipped && waited < max_wait_) {
      ++it;
      continue;
    }
    if (!shipped) {
      spdlog::warn(
          "run {} attempt {}: reported finished with part of its output not yet in the log "
          "service after {} (the shipper goes on sending it)",
          held.finished.run_id(), held.finished.resumption_index(), absl::FormatDuration(waited));
    }
    released.push_back(std::move(held.finished));
    it = held_.erase(it);
  }
  return released;
}

bool FinishGate::Holds(const std::string& run_id, int resumption) const {
  return held_.count({run_id, resumption}) > 0;
}

}  // namespace tessera::worker
