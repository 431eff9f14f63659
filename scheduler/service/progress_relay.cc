#include "scheduler/service/progress_relay.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "base/timestamps.h"

namespace tessera::scheduler {

ProgressRelay::ProgressRelay(std::shared_ptr<RunsClient> runs, std::shared_ptr<Clock> clock,
                             ProgressRelayConfig config)
    : runs_(std::move(runs)), clock_(std::move(clock)), config_(config) {}

bool ProgressRelay::Transient(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:  // the run manager, or its database, is away
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

absl::Status ProgressRelay::Relay(const std::string& node, const v1::ProgressUpdate& update) {
  v1::ReportProgressRequest req;
  req.set_run_id(update.run_id());
  req.set_resumption_index(update.resumption_index());
  *req.mutable_progress() = update.progress();
  // When it arrived, on the control plane's clock (not the node's): a report kept through an
  // outage keeps its time.
  *req.mutable_progress()->mutable_reported_at() = ToProtoTime(clock_->Now());
  req.set_node_name(node);
  const AttemptKey key{update.run_id(), update.resumption_index()};
  {
    absl::MutexLock lock(&mu_);
    if (kept_.contains(key)) {  // behind the attempt's earlier reports, in order
      Keep(key, std::move(req));
      return absl::OkStatus();
    }
  }
  absl::Status st = runs_->ReportProgress(req);
  if (st.ok() || !Transient(st)) return st;
  absl::MutexLock lock(&mu_);
  if (total_ == 0) {
    spdlog::warn("progress reports kept until the run manager takes them again: {}", st.ToString());
  }
  Keep(key, std::move(req));
  return absl::OkStatus();
}

void ProgressRelay::Keep(const AttemptKey& key, v1::ReportProgressRequest req) {
  auto it = kept_.find(key);
  if (it == kept_.end() && total_ >= config_.max_total) {
    if (!warned_full_) {
      spdlog::error("{} progress reports kept: the newest of run {} is dropped", total_, key.first);
      warned_full_ = true;
    }
    return;
  }
  auto& queue = kept_[key];
  const bool over = static_cast<int>(queue.size()) >= config_.max_per_attempt ||
                    (total_ >= config_.max_total && queue.size() > 2);
  if (over) {
    // Every second report between the first and the last goes (never the first: it may be on
    // its way now; never the newest).
    std::deque<v1::ReportProgressRequest> thinned;
    const size_t n = queue.size();
    for (size_t i = 0; i < n; ++i) {
      if (i == 0 || i + 1 == n || i % 2 == 0) thinned.push_back(std::move(queue[i]));
    }
    total_ -= static_cast<int>(n - thinned.size());
    queue = std::move(thinned);
  }
  queue.push_back(std::move(req));
  ++total_;
}

int ProgressRelay::RetryDue() {
  std::vector<AttemptKey> keys;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    if (total_ == 0 || retrying_ || now - last_retry_ < config_.retry_interval) return 0;
    retrying_ = true;
    last_retry_ = now;
    for (const auto& [key, queue] : kept_) keys.push_back(key);
  }
  int sent = 0;
  {
    absl::MutexLock sending(&send_mu_);
    for (const auto& key : keys) {
      if (!SendKept(key, sent).ok()) break;  // still away: the rest waits for the next interval
    }
  }
  absl::MutexLock lock(&mu_);
  retrying_ = false;
  if (total_ == 0 && sent > 0) {
    spdlog::info("every kept progress report was delivered");
    warned_full_ = false;
  }
  return sent;
}

absl::Status ProgressRelay::SendKept(const AttemptKey& key, int& sent) {
  for (;;) {
    v1::ReportProgressRequest next;
    {
      absl::MutexLock lock(&mu_);
      auto it = kept_.find(key);
      if (it == kept_.end()) return absl::OkStatus();
      next = it->second.front();
    }
    const absl::Status st = runs_->ReportProgress(next);
    if (Transient(st)) return st;
    if (st.ok()) {
      ++sent;
    } else {
      spdlog::warn("a kept progress report of run {} was refused: {}", key.first, st.ToString());
    }
    absl::MutexLock lock(&mu_);
    auto it = kept_.find(key);
    it->second.pop_front();
    --total_;
    if (it->second.empty()) kept_.erase(it);
  }
}

absl::Status ProgressRelay::DeliverKept(const std::string& run_id, int resumption_index) {
  const AttemptKey key{run_id, resumption_index};
  {
    absl::MutexLock lock(&mu_);
    if (!kept_.contains(key)) return absl::OkStatus();  // the usual case: nothing to wait for
  }
  int sent = 0;
  absl::MutexLock sending(&send_mu_);
  const absl::Status st = SendKept(key, sent);
  if (sent > 0) {
    spdlog::info("{} kept progress report(s) of run {} delivered before its attempt {} ended", sent,
                 run_id, resumption_index);
  }
  return st;
}

int ProgressRelay::pending() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

}  // namespace tessera::scheduler
