// Usage in memory: every stored attempt that started, with its run.
#include <algorithm>

#include "base/timestamps.h"
#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

class MemoryUsageStore final : public UsageStore {
 public:
  explicit MemoryUsageStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::StatusOr<std::vector<AttemptUsage>> ListAttemptUsage(absl::Time since,
                                                             absl::Time until) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<AttemptUsage> out;
    for (const auto& [key, attempt] : db_->attempts) {
      if (!attempt.has_started_at()) continue;
      auto run = db_->runs.find(key.first);
      if (run == db_->runs.end()) continue;
      AttemptUsage usage = UsageOf(run->second, attempt);
      if (usage.started_at >= until || usage.ended_at < since) continue;
      out.push_back(std::move(usage));
    }
    std::stable_sort(out.begin(), out.end(), [](const AttemptUsage& a, const AttemptUsage& b) {
      return a.started_at < b.started_at;
    });
    return out;
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<UsageStore> MakeMemoryUsageStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryUsageStore>(std::move(db));
}

}  // namespace tessera::store
