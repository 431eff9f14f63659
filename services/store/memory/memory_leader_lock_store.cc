// Leader locks in memory: the database records each role's holder, so that several instances
// (several stores over one MemoryDatabase, or one store asked under several names) contend as
// they do over PostgreSQL. A hold lives in the session of the store that took it, and ends by
// Release, MemoryDatabase::EndLeaderSession, or when that store goes away (as a process's
// connections close when it dies).
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

class MemoryLeaderLockStore final : public LeaderLockStore {
 public:
  explicit MemoryLeaderLockStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  ~MemoryLeaderLockStore() override {
    absl::MutexLock lock(&db_->mu);
    std::erase_if(db_->leaders, [this](const auto& kv) { return kv.second.store == this; });
  }

  absl::StatusOr<std::optional<int64_t>> TryAcquire(std::string_view role,
                                                    std::string_view instance) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = Reachable(role, instance); !st.ok()) return st;
    auto it = db_->leaders.find(role);
    if (it == db_->leaders.end()) {
      db_->leaders.emplace(std::string(role),
                           MemoryDatabase::LeaderHold{std::string(instance), this});
      return ++db_->leader_epochs[std::string(role)];
    }
    if (!Mine(it->second, instance)) return std::nullopt;
    return db_->leader_epochs[std::string(role)];
  }

  absl::Status CheckHeld(std::string_view role, std::string_view instance) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = Reachable(role, instance); !st.ok()) return st;
    auto it = db_->leaders.find(role);
    if (it == db_->leaders.end() || !Mine(it->second, instance)) {
      return absl::FailedPreconditionError(
          absl::StrCat(std::string(instance), " does not hold the ", std::string(role), " role"));
    }
    return absl::OkStatus();
  }

  absl::Status Release(std::string_view role, std::string_view instance) override {
    absl::MutexLock lock(&db_->mu);
    // Even while the database is "down": the session ends either way, and with it the hold.
    DropHold(role, instance);
    return absl::OkStatus();
  }

 private:
  bool Mine(const MemoryDatabase::LeaderHold& hold, std::string_view instance) const {
    return hold.instance == instance && hold.store == this;
  }

  // While the database is "down", a holder's session is as broken as its connection to
  // PostgreSQL would be: the hold is lost.
  absl::Status Reachable(std::string_view role, std::string_view instance)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_->mu) {
    absl::Status st = db_->CheckAvailable();
    if (!st.ok()) DropHold(role, instance);
    return st;
  }

  void DropHold(std::string_view role, std::string_view instance)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_->mu) {
    auto it = db_->leaders.find(role);
    if (it != db_->leaders.end() && Mine(it->second, instance)) db_->leaders.erase(it);
  }

  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<LeaderLockStore> MakeMemoryLeaderLockStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryLeaderLockStore>(std::move(db));
}

}  // namespace tessera::store
