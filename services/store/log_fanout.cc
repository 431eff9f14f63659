#include "services/store/log_fanout.h"

#include <algorithm>
#include <optional>

#include "base/log_line_codec.h"
#include "services/store/log_precision.h"

namespace tessera::store {

using AttemptKey = std::pair<std::string, int32_t>;

namespace {

// A subscriber's queue is dropped: its next Take is incomplete, and it reads the store.
void DropQueue(std::vector<LogLineBatch>& queued, int64_t& queued_lines, bool& overflowed) {
  queued.clear();
  queued_lines = 0;
  overflowed = true;
}

}  // namespace

struct LogSubscription::Shared {
  std::shared_ptr<ChangeFeed> feed;
  int64_t max_queued_lines = 0;
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
  queued_lines_ = 0;
  overflowed_ = false;
  foreign_seen_ = foreign;
  return taken;
}

LogFanout::LogFanout(std::shared_ptr<ChangeFeed> feed, int64_t max_queued_lines)
    : shared_(std::make_shared<LogSubscription::Shared>()) {
  shared_->feed = std::move(feed);
  shared_->max_queued_lines = std::max<int64_t>(max_queued_lines, 1);
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
  {
    absl::MutexLock lock(&shared_->mu);
    if (shared_->subscribers.empty()) return;
    // The batch's lines per followed attempt, as a reader gets them back from the store (times
    // to the microsecond: packed lines have no finer). A batch holds runs of lines of one
    // attempt: the key is made and looked up once per run.
    struct Followed {
      LogBatchToStore batch;
      int64_t lines = 0;
    };
    std::map<AttemptKey, Followed> followed;
    std::optional<AttemptKey> run;  // the attempt of the run of lines at hand
    Followed* into = nullptr;
    const auto attempt = [&](const std::string& run_id, int32_t resumption_index) {
      if (!run || run->first != run_id || run->second != resumption_index) {
        run.emplace(run_id, resumption_index);
        into = shared_->subscribers.contains(*run) ? &followed[*run] : nullptr;
      }
      return into;
    };
    for (auto& l : batch.lines) {
      if (Followed* f = attempt(l.run_id(), l.resumption_index())) {
        ToStoredPrecision(l);
        f->batch.lines.push_back(std::move(l));
        ++f->lines;
      }
    }
    for (auto& group : batch.packed) {
      if (Followed* f = attempt(group.run_id(), group.resumption_index())) {
        f->lines += static_cast<int64_t>(CountChunkLines(group.lines()));
        f->batch.packed.push_back(std::move(group));
      }
    }
    for (auto& [key, attempt_lines] : followed) {
      const int64_t n = attempt_lines.lines;
      auto shared = std::make_shared<const LogBatchToStore>(std::move(attempt_lines.batch));
      for (LogSubscription* sub : shared_->subscribers[key]) {
        if (sub->overflowed_) continue;
        if (sub->queued_lines_ + n > shared_->max_queued_lines) {
          DropQueue(sub->queued_, sub->queued_lines_, sub->overflowed_);
          continue;
        }
        sub->queued_.push_back(shared);
        sub->queued_lines_ += n;
      }
      delivered = true;
    }
  }
  if (delivered) shared_->feed->Bump(ChangeTopic::kLogs);
}

void LogFanout::Invalidate() {
  {
    absl::MutexLock lock(&shared_->mu);
    if (shared_->subscribers.empty()) return;
    for (auto& [key, subs] : shared_->subscribers) {
      for (LogSubscription* sub : subs)
        DropQueue(sub->queued_, sub->queued_lines_, sub->overflowed_);
    }
  }
  shared_->feed->Bump(ChangeTopic::kLogs);
}

}  // namespace tessera::store
