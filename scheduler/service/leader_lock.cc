#include "scheduler/service/leader_lock.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>

#include "services/store/postgres/pg_pool.h"

namespace tessera::scheduler {
namespace {

// An arbitrary constant naming the scheduler's advisory lock.
constexpr int64_t kSchedulerLockKey = 0x7e55e7a5c4ed;

class PgLeaderLock final : public LeaderLock {
 public:
  explicit PgLeaderLock(std::string url) : url_(store::WithConnectTimeout(url, 3)) {}

  bool Lead() override {
    try {
      if (!conn_ || !conn_->is_open()) {
        held_ = false;
        conn_ = std::make_unique<pqxx::connection>(url_);
      }
      pqxx::nontransaction tx(*conn_);
      if (held_) {
        tx.exec("SELECT 1");  // the session, and so the lock, is alive
        return true;
      }
      held_ = tx.exec_params("SELECT pg_try_advisory_lock($1)", kSchedulerLockKey)[0][0].as<bool>();
      if (held_) spdlog::info("this scheduler instance is now the leader");
      return held_;
    } catch (const std::exception& e) {
      if (held_) spdlog::warn("lost the scheduler leadership: {}", e.what());
      held_ = false;
      conn_.reset();
      return false;
    }
  }

 private:
  std::string url_;
  std::unique_ptr<pqxx::connection> conn_;
  bool held_ = false;
};

class AlwaysLeader final : public LeaderLock {
 public:
  bool Lead() override { return true; }
};

}  // namespace

std::unique_ptr<LeaderLock> MakePgLeaderLock(std::string database_url) {
  return std::make_unique<PgLeaderLock>(std::move(database_url));
}

std::unique_ptr<LeaderLock> MakeAlwaysLeader() { return std::make_unique<AlwaysLeader>(); }

}  // namespace tessera::scheduler
