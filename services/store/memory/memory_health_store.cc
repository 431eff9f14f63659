#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "services/store/filters.h"
#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

class MemoryHealthStore final : public HealthStore {
 public:
  explicit MemoryHealthStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::Status CreateSweep(const v1::Sweep& sweep) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (!db_->sweeps.emplace(sweep.id(), sweep).second) {
      return absl::AlreadyExistsError(absl::StrCat("sweep ", sweep.id(), " already exists"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<v1::Sweep> GetSweep(std::string_view id) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->sweeps.find(std::string(id));
    if (it == db_->sweeps.end())
      return absl::NotFoundError(absl::StrCat("sweep ", std::string(id), " not found"));
    return it->second;
  }

  absl::Status UpdateSweep(const v1::Sweep& sweep) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->sweeps.find(sweep.id());
    if (it == db_->sweeps.end()) {
      return absl::NotFoundError(absl::StrCat("sweep ", sweep.id(), " not found"));
    }
    it->second = sweep;
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<v1::Sweep>> ListSweeps(int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::Sweep> out;
    for (const auto& [id, sweep] : db_->sweeps) out.push_back(sweep);
    std::sort(out.begin(), out.end(), [](const v1::Sweep& a, const v1::Sweep& b) {
      const int64_t ta = ToMicros(a.created_at()), tb = ToMicros(b.created_at());
      return ta != tb ? ta > tb : a.id() > b.id();
    });
    if (limit > 0 && static_cast<int>(out.size()) > limit) out.resize(limit);
    return out;
  }

  absl::StatusOr<int64_t> DeleteSweepsBefore(absl::Time before, int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<const v1::Sweep*> old;
    for (const auto& [id, sweep] : db_->sweeps) {
      if (FromProtoTime(sweep.created_at()) < before && sweep.state() != v1::SWEEP_STATE_RUNNING) {
        old.push_back(&sweep);
      }
    }
    std::sort(old.begin(), old.end(), [](const v1::Sweep* a, const v1::Sweep* b) {
      const int64_t ta = ToMicros(a->created_at()), tb = ToMicros(b->created_at());
      return ta != tb ? ta < tb : a->id() < b->id();
    });
    if (limit > 0 && static_cast<int>(old.size()) > limit) old.resize(limit);
    std::vector<std::string> ids;
    for (const auto* sweep : old) ids.push_back(sweep->id());
    for (const auto& id : ids) db_->sweeps.erase(id);
    std::erase_if(db_->health_results, [&](const v1::HealthCheckResult& r) {
      return std::find(ids.begin(), ids.end(), r.sweep_id()) != ids.end();
    });
    return static_cast<int64_t>(ids.size());
  }

  absl::StatusOr<v1::HealthCheckResult> AddResult(const v1::HealthCheckResult& result) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    v1::HealthCheckResult stored = result;
    stored.set_id(db_->next_health_result_id++);
    db_->health_results.push_back(stored);
    return stored;
  }

  absl::StatusOr<std::vector<v1::HealthCheckResult>> ListResults(
      const std::vector<std::string>& node_names, std::string_view sweep_id, int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::HealthCheckResult> out;
    for (auto it = db_->health_results.rbegin(); it != db_->health_results.rend(); ++it) {
      if (!sweep_id.empty() && it->sweep_id() != sweep_id) continue;
      if (!node_names.empty() &&
          std::find(node_names.begin(), node_names.end(), it->node_name()) == node_names.end()) {
        continue;
      }
      out.push_back(*it);
      if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    }
    return out;
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<HealthStore> MakeMemoryHealthStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryHealthStore>(std::move(db));
}

}  // namespace tessera::store
