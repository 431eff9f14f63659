#include <algorithm>
#include <climits>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "proto/policy/run_status.h"
#include "services/store/filters.h"
#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

class MemoryRunStore final : public RunStore {
 public:
  explicit MemoryRunStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::StatusOr<v1::Run> CreateRun(const v1::Run& run, const std::vector<v1::RunEvent>& events,
                                    const std::optional<IdempotentRunWrite>& idem) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (idem) TESSERA_RETURN_IF_ERROR(db_->CheckKeyFree(idem->key));
    if (db_->runs.count(run.id()) || db_->run_ids_by_name.count(run.name())) {
      return absl::AlreadyExistsError(absl::StrCat("run ", run.name(), " already exists"));
    }
    v1::Run stored = run;
    stored.set_version(1);
    db_->runs[stored.id()] = stored;
    db_->run_ids_by_name[stored.name()] = stored.id();
    for (const auto& e : events) AppendLocked(e, stored.id());
    if (idem) db_->RecordResponse(idem->key, idem->response(stored));
    return stored;
  }

  absl::StatusOr<v1::Run> GetRun(std::string_view name) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->run_ids_by_name.find(std::string(name));
    if (it == db_->run_ids_by_name.end()) {
      return absl::NotFoundError(absl::StrCat("run ", std::string(name), " not found"));
    }
    return db_->runs.at(it->second);
  }

  absl::StatusOr<v1::Run> GetRunById(std::string_view id) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->runs.find(std::string(id));
    if (it == db_->runs.end())
      return absl::NotFoundError(absl::StrCat("run id ", std::string(id), " not found"));
    return it->second;
  }

  absl::StatusOr<std::vector<v1::Run>> ListRuns(const v1::RunFilter& filter) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::Run> out;
    for (const auto& [id, run] : db_->runs) {
      if (!RunMatches(run, filter)) continue;
      out.push_back(run);
      SummarizeRun(&out.back());
    }
    std::sort(out.begin(), out.end(), [](const v1::Run& a, const v1::Run& b) {
      const int64_t ta = ToMicros(a.created_at()), tb = ToMicros(b.created_at());
      return ta != tb ? ta > tb : a.id() > b.id();
    });
    size_t limit = filter.latest() ? 1 : (filter.limit() > 0 ? filter.limit() : out.size());
    if (out.size() > limit) out.resize(limit);
    return out;
  }

  absl::StatusOr<v1::Run> UpdateRun(const v1::Run& run, int64_t expected_version,
                                    const std::vector<v1::RunEvent>& events,
                                    const std::vector<v1::Attempt>& attempts,
                                    const std::optional<WriteFence>& fence,
                                    const std::optional<IdempotentRunWrite>& idem) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (auto st = db_->CheckFence(fence); !st.ok()) return st;
    if (idem) TESSERA_RETURN_IF_ERROR(db_->CheckKeyFree(idem->key));
    auto it = db_->runs.find(run.id());
    if (it == db_->runs.end())
      return absl::NotFoundError(absl::StrCat("run ", run.name(), " not found"));
    if (it->second.version() != expected_version) {
      return absl::AbortedError(absl::StrCat("run ", run.name(), " changed concurrently (version ",
                                             it->second.version(), ", expected ", expected_version,
                                             ")"));
    }
    if (run.name() != it->second.name()) {
      if (db_->run_ids_by_name.count(run.name())) {
        return absl::AlreadyExistsError(absl::StrCat("run ", run.name(), " already exists"));
      }
      db_->run_ids_by_name.erase(it->second.name());
      db_->run_ids_by_name[run.name()] = run.id();
    }
    v1::Run stored = run;
    stored.set_version(expected_version + 1);
    it->second = stored;
    for (const auto& e : events) AppendLocked(e, stored.id());
    for (const auto& a : attempts) db_->attempts[{stored.id(), a.resumption_index()}] = a;
    if (idem) db_->RecordResponse(idem->key, idem->response(stored));
    return stored;
  }

  absl::Status DeleteRun(std::string_view id, const std::optional<IdempotentRunWrite>& idem,
                         std::optional<int64_t> expected_version) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (idem) TESSERA_RETURN_IF_ERROR(db_->CheckKeyFree(idem->key));
    auto it = db_->runs.find(std::string(id));
    if (it == db_->runs.end())
      return absl::NotFoundError(absl::StrCat("run id ", std::string(id), " not found"));
    if (expected_version && it->second.version() != *expected_version) {
      return absl::AbortedError(
          absl::StrCat("run id ", std::string(id), " changed concurrently (version ",
                       it->second.version(), ", expected ", *expected_version, ")"));
    }
    if (idem) db_->RecordResponse(idem->key, idem->response(it->second));
    db_->run_ids_by_name.erase(it->second.name());
    db_->runs.erase(it);
    std::erase_if(db_->attempts, [&](const auto& kv) { return kv.first.first == id; });
    std::erase_if(db_->run_events, [&](const v1::RunEvent& e) { return e.run_id() == id; });
    std::erase_if(db_->progress, [&](const auto& kv) { return kv.first.first == id; });
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<v1::Run>> ListRunsEndedBefore(absl::Time before, int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::Run> out;
    for (const auto& [id, run] : db_->runs) {
      if (IsTerminal(run.status()) && run.has_ended_at() && FromProtoTime(run.ended_at()) < before)
        out.push_back(run);
    }
    std::sort(out.begin(), out.end(), [](const v1::Run& a, const v1::Run& b) {
      const absl::Time ta = FromProtoTime(a.ended_at()), tb = FromProtoTime(b.ended_at());
      return ta != tb ? ta < tb : a.id() < b.id();
    });
    if (limit >= 0 && out.size() > static_cast<size_t>(limit)) out.resize(limit);
    return out;
  }

  absl::Status PutAttempt(const v1::Attempt& attempt) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (!db_->runs.count(attempt.run_id())) {
      return absl::NotFoundError(absl::StrCat("run id ", attempt.run_id(), " not found"));
    }
    db_->attempts[{attempt.run_id(), attempt.resumption_index()}] = attempt;
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<v1::Attempt>> ListAttempts(std::string_view run_id) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::Attempt> out;
    for (const auto& [key, attempt] : db_->attempts) {
      if (key.first == run_id) out.push_back(attempt);
    }
    return out;  // std::map orders by resumption within a run
  }

  absl::Status AddProgressPoint(std::string_view run_id, const ProgressPoint& point, int64_t stride,
                                int64_t thin_from) override {
    if (stride < 1) return absl::InvalidArgumentError("stride: at least 1");
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (!db_->runs.count(std::string(run_id))) {
      return absl::NotFoundError(absl::StrCat("run id ", std::string(run_id), " not found"));
    }
    auto& points = db_->progress[{std::string(run_id), point.resumption_index}];
    ProgressPoint stored = point;
    stored.time = absl::FromUnixMicros(absl::ToUnixMicros(point.time));  // as PostgreSQL keeps it
    points[point.step] = stored;
    // Of each bucket's points, the earliest stays.
    for (auto it = points.lower_bound(thin_from); it != points.end() && it->first < point.step;) {
      const bool earliest =
          it == points.begin() || std::prev(it)->first / stride != it->first / stride;
      it = earliest ? std::next(it) : points.erase(it);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<ProgressPoint>> ListProgress(std::string_view run_id) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<ProgressPoint> out;
    for (auto it = db_->progress.lower_bound({std::string(run_id), INT32_MIN});
         it != db_->progress.end() && it->first.first == run_id; ++it) {
      for (const auto& [step, p] : it->second) out.push_back(p);
    }
    return out;
  }

  absl::StatusOr<v1::RunEvent> AppendEvent(const v1::RunEvent& event) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (!db_->runs.count(event.run_id())) {
      return absl::NotFoundError(absl::StrCat("run id ", event.run_id(), " not found"));
    }
    return AppendLocked(event, event.run_id());
  }

  absl::StatusOr<std::vector<v1::RunEvent>> ListEvents(std::string_view run_id, int64_t after_id,
                                                       int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::RunEvent> out;
    for (const auto& e : db_->run_events) {
      if (e.run_id() != run_id || e.id() <= after_id) continue;
      out.push_back(e);
      if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    }
    return out;
  }

  absl::StatusOr<int64_t> UserUid(std::string_view user) override {
    if (user.empty()) return absl::InvalidArgumentError("user: required for a uid");
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->user_uids.find(user);
    if (it != db_->user_uids.end()) return it->second;
    const int64_t uid = kFirstUserUid + static_cast<int64_t>(db_->user_uids.size());
    db_->user_uids.emplace(std::string(user), uid);
    return uid;
  }

  absl::StatusOr<std::vector<v1::RunEvent>> ListAllEvents(int64_t after_id, int limit) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::RunEvent> out;
    for (const auto& e : db_->run_events) {
      if (e.id() <= after_id) continue;
      out.push_back(e);
      if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    }
    return out;
  }

 private:
  v1::RunEvent AppendLocked(const v1::RunEvent& event, const std::string& run_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_->mu) {
    v1::RunEvent stored = event;
    stored.set_id(db_->next_run_event_id++);
    stored.set_run_id(run_id);
    db_->run_events.push_back(stored);
    db_->changes->Bump(ChangeTopic::kRunEvents);
    return stored;
  }

  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<RunStore> MakeMemoryRunStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryRunStore>(std::move(db));
}

}  // namespace tessera::store
