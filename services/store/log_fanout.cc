#include "services/store/log_fanout.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "services/store/log_precision.h"

namespace tessera::store {

using AttemptKey = std::pair<std::string, int32_t>;

namespace {

// A subscriber's queue is dropped: its next Take is incomplete, and it reads the store.
void DropQueue(std::vector<LogLineBatch>& queued, int64_t& queued_bytes, bool& overflowed) {
  queued.clear();
  queued_bytes = 0;
  overflowed = true;
}

}  // namespace

struct LogSubscription::Shared {
  std::shared_ptr<ChangeFeed> feed;
  int64_t max_queued_bytes = 0;
  absl::Mutex mu;
  std::map<AttemptKey, std::vector<LogSubscription*>> subscribers ABSL_GUARDED_BY(mu);
};

LogSubscription::LogSubscription(std::shared_ptr<Shared> shared, std::string run_id,
                                 int32_t resumption_index, uint64_t foreign_seen)
    : shared_(std::move(shared)),
      run_id_(std::move(run_id)),
      resumption_index_(resumption_index),
      foreign_seen_(foreign_seen) {}

LogSubscription::~LogSubscription() {
  absl::MutexLock lock(&shared_->mu);
  auto it = shared_->subscribers.find({run_id_, resumption_index_});
  if (it == shared_->subscribers.end()) return;
  std::erase(it->second, this);
  if (it->second.empty()) shared_->subscribers.erase(it);
}

LogSubscription::Taken LogSubscription::Take() {
  // Read before the queue: a foreign commit noticed after this is counted at the next Take.
  const uint64_t foreign = shared_->feed->ForeignGeneration(ChangeTopic::kLogs);
  const bool live = shared_->feed->live();
  Taken taken;
  absl::MutexLock lock(&shared_->mu);
  taken.complete = live && !overflowed_ && foreign == foreign_seen_;
  taken.batches.swap(queued_);
  queued_bytes_ = 0;
  overflowed_ = false;
  foreign_seen_ = foreign;
  waker_ = nullptr;
  return taken;
}

void LogSubscription::WakeOnNews(std::function<void()> wake) {
  {
    absl::MutexLock lock(&shared_->mu);
    if (queued_.empty() && !overflowed_) {
      waker_ = std::move(wake);
      return;
    }
  }
  wake();
}

int64_t LogFanout::QueuedBytes(const LogBatchToStore& batch) {
  int64_t bytes = 0;
  for (const auto& l : batch.lines) {
    bytes += static_cast<int64_t>(l.text().size() + l.run_id().size() + l.node_name().size()) +
             kOverheadBytes;
  }
  for (const auto& g : batch.packed) {
    bytes += static_cast<int64_t>(g.lines().size() + g.run_id().size() + g.node_name().size()) +
             kOverheadBytes;
  }
  return bytes;
}

LogFanout::LogFanout(std::shared_ptr<ChangeFeed> feed, int64_t max_queued_bytes)
    : shared_(std::make_shared<LogSubscription::Shared>()) {
  shared_->feed = std::move(feed);
  shared_->max_queued_bytes = std::max<int64_t>(max_queued_bytes, 1);
}

std::unique_ptr<LogSubscription> LogFanout::Subscribe(const std::string& run_id,
                                                      int32_t resumption_index) {
  const uint64_t foreign = shared_->feed->ForeignGeneration(ChangeTopic::kLogs);
  std::unique_ptr<LogSubscription> sub(
      new LogSubscription(shared_, run_id, resumption_index, foreign));
  absl::MutexLock lock(&shared_->mu);
  shared_->subscribers[{run_id, resumption_index}].push_back(sub.get());
  return sub;
}

void LogFanout::Publish(LogBatchToStore batch) {
  bool delivered = false;
  std::vector<std::function<void()>> wake;  // called once the lock is let go
  {
    absl::MutexLock lock(&shared_->mu);
    if (shared_->subscribers.empty()) return;
    // The batch's lines per followed attempt, as a reader gets them back from the store (times
    // to the microsecond: packed lines have no finer). A batch holds runs of lines of one
    // attempt: the key is made and looked up once per run.
    std::map<AttemptKey, LogBatchToStore> followed;
    std::optional<AttemptKey> run;  // the attempt of the run of lines at hand
    LogBatchToStore* into = nullptr;
    const auto attempt = [&](const std::string& run_id, int32_t resumption_index) {
      if (!run || run->first != run_id || run->second != resumption_index) {
        run.emplace(run_id, resumption_index);
        into = shared_->subscribers.contains(*run) ? &followed[*run] : nullptr;
      }
      return into;
    };
    for (auto& l : batch.lines) {
      if (LogBatchToStore* f = attempt(l.run_id(), l.resumption_index())) {
        ToStoredPrecision(l);
        f->lines.push_back(std::move(l));
      }
    }
    for (auto& group : batch.packed) {
      if (LogBatchToStore* f = attempt(group.run_id(), group.resumption_index())) {
        f->packed.push_back(std::move(group));
      }
    }
    for (auto& [key, attempt_lines] : followed) {
      const int64_t n = QueuedBytes(attempt_lines);
      auto shared = std::make_shared<const LogBatchToStore>(std::move(attempt_lines));
      for (LogSubscription* sub : shared_->subscribers[key]) {
        if (sub->waker_) wake.push_back(std::exchange(sub->waker_, nullptr));
        if (sub->overflowed_) continue;
        if (sub->queued_bytes_ + n > shared_->max_queued_bytes) {
          DropQueue(sub->queued_, sub->queued_bytes_, sub->overflowed_);
          continue;
        }
        sub->queued_.push_back(shared);
        sub->queued_bytes_ += n;
      }
      delivered = true;
    }
  }
  for (auto& w : wake) w();
  if (delivered) shared_->feed->Bump(ChangeTopic::kLogs);
}

void LogFanout::Invalidate() {
  std::vector<std::function<void()>> wake;  // called once the lock is let go
  {
    absl::MutexLock lock(&shared_->mu);
    if (shared_->subscribers.empty()) return;
    for (auto& [key, subs] : shared_->subscribers) {
      for (LogSubscription* sub : subs) {
        DropQueue(sub->queued_, sub->queued_bytes_, sub->overflowed_);
        if (sub->waker_) wake.push_back(std::exchange(sub->waker_, nullptr));
      }
    }
  }
  for (auto& w : wake) w();
  shared_->feed->Bump(ChangeTopic::kLogs);
}

}  // namespace tessera::store
