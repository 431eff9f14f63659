// Leader locks as PostgreSQL session-level advisory locks. Each (role, instance) contender has a
// connection of its own, outside the pool: a session lock belongs to the connection that took it,
// and the server frees it when that connection ends, which is what hands the role to a standby
// when a holder dies.
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {
namespace {

// The scheduler's key predates named roles; it stays, so that instances of earlier releases
// contend on the same lock during a rolling upgrade.
constexpr int64_t kSchedulerLockKey = 0x7e55e7a5c4ed;

// The lock's connection string: the client notices a server that went silent (a cut network, a
// dead host) within about the session timeout.
std::string LockConnInfo(std::string conninfo, const LeaderSessionOptions& options) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"keepalives", "1"},
           {"keepalives_idle", "2"},
           {"keepalives_interval", "1"},
           {"keepalives_count", "3"},
           {"tcp_user_timeout", absl::StrCat(absl::ToInt64Milliseconds(options.timeout))}}) {
    conninfo = WithConnParam(conninfo, key, value);
  }
  return conninfo;
}

class PgLeaderLockStore final : public LeaderLockStore {
 public:
  PgLeaderLockStore(std::string conninfo, LeaderSessionOptions options)
      : conninfo_(LockConnInfo(std::move(conninfo), options)), options_(options) {}

  ~PgLeaderLockStore() override {
    absl::MutexLock lock(&mu_);
    for (auto& [key, session] : sessions_) End(key.first, *session);
  }

  absl::StatusOr<std::optional<int64_t>> TryAcquire(std::string_view role,
                                                    std::string_view instance) override {
    std::shared_ptr<Session> s = SessionFor(role, instance);
    absl::MutexLock lock(&s->mu);
    try {
      if (!s->conn || !s->conn->is_open()) {
        s->held = false;
        s->conn = std::make_unique<pqxx::connection>(conninfo_);
        Configure(*s->conn);
      }
      if (s->held) {
        pqxx::nontransaction tx(*s->conn);
        tx.exec("SELECT 1");  // the session, and so the lock, is alive
        return s->epoch;
      }
      pqxx::work tx(*s->conn);
      const bool taken =
          tx.exec_params("SELECT pg_try_advisory_lock($1)", PgLeaderLockKey(role))[0][0].as<bool>();
      if (!taken) {
        tx.commit();
        return std::nullopt;
      }
      // A new term. The row lock this takes waits for writes of the previous term that are in
      // flight (they hold the row FOR SHARE), so each of them lands before the term ends.
      s->epoch = tx.exec_params(
                       "INSERT INTO leader_terms (role, epoch, holder) VALUES ($1, 1, $2)"
                       " ON CONFLICT (role) DO UPDATE SET epoch = leader_terms.epoch + 1,"
                       " holder = EXCLUDED.holder, since = now() RETURNING epoch",
                       std::string(role), std::string(instance))[0][0]
                     .as<int64_t>();
      tx.commit();
      s->held = true;
      return s->epoch;
    } catch (const std::exception& e) {
      return Broken(role, *s, e);
    }
  }

  absl::Status CheckHeld(std::string_view role, std::string_view instance) override {
    std::shared_ptr<Session> s = FindSession(role, instance);
    if (s == nullptr) return NotHeld(role, instance);
    absl::MutexLock lock(&s->mu);
    if (!s->held || !s->conn) return NotHeld(role, instance);
    try {
      pqxx::nontransaction tx(*s->conn);
      tx.exec("SELECT 1");
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return Broken(role, *s, e);
    }
  }

  absl::Status Release(std::string_view role, std::string_view instance) override {
    std::shared_ptr<Session> s;
    {
      absl::MutexLock lock(&mu_);
      auto it = sessions_.find(Key(role, instance));
      if (it == sessions_.end()) return absl::OkStatus();
      s = std::move(it->second);
      sessions_.erase(it);
    }
    End(std::string(role), *s);
    return absl::OkStatus();
  }

 private:
  struct Session {
    absl::Mutex mu;
    std::unique_ptr<pqxx::connection> conn ABSL_GUARDED_BY(mu);
    bool held ABSL_GUARDED_BY(mu) = false;
    int64_t epoch ABSL_GUARDED_BY(mu) = 0;
  };

  // The server ends the session of a holder that stops asking (frozen, or its host gone) after
  // the session timeout, which frees the lock for a standby; a statement never waits longer.
  void Configure(pqxx::connection& conn) const {
    pqxx::nontransaction tx(conn);
    const std::string ms = absl::StrCat(absl::ToInt64Milliseconds(options_.timeout));
    tx.exec(absl::StrCat("SET idle_session_timeout = ", ms, "; SET statement_timeout = ", ms,
                         "; SET lock_timeout = ", ms,
                         "; SET tcp_keepalives_idle = 2; SET tcp_keepalives_interval = 1;"
                         " SET tcp_keepalives_count = 3"));
  }
  using SessionKey = std::pair<std::string, std::string>;  // (role, instance)

  static SessionKey Key(std::string_view role, std::string_view instance) {
    return {std::string(role), std::string(instance)};
  }

  static absl::Status NotHeld(std::string_view role, std::string_view instance) {
    return absl::FailedPreconditionError(
        absl::StrCat(std::string(instance), " does not hold the ", std::string(role), " role"));
  }

  // The session is unusable: drop it, and with it any hold (the server frees the lock when it
  // notices the connection is gone).
  static absl::Status Broken(std::string_view role, Session& s, const std::exception& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    const bool was_held = s.held;
    s.held = false;
    s.conn.reset();
    return absl::UnavailableError(absl::StrCat(
        was_held ? "the database session holding the " : "no database session for the ",
        std::string(role), " lock: ", e.what()));
  }

  // Unlocks explicitly before closing: the server frees a closed session's locks only once its
  // backend has exited, and a standby asking in between would be refused.
  static void End(const std::string& role, Session& s) {
    absl::MutexLock lock(&s.mu);
    if (s.conn && s.held) {
      try {
        pqxx::nontransaction tx(*s.conn);
        tx.exec_params("SELECT pg_advisory_unlock($1)", PgLeaderLockKey(role));
      } catch (const std::exception& e) {
        // Closing the connection below frees the lock as well, only later.
        spdlog::warn("releasing the {} lock: {}", role, e.what());
      }
    }
    s.held = false;
    s.conn.reset();
  }

  std::shared_ptr<Session> SessionFor(std::string_view role, std::string_view instance) {
    absl::MutexLock lock(&mu_);
    auto& s = sessions_[Key(role, instance)];
    if (s == nullptr) s = std::make_shared<Session>();
    return s;
  }

  std::shared_ptr<Session> FindSession(std::string_view role, std::string_view instance) {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(Key(role, instance));
    return it == sessions_.end() ? nullptr : it->second;
  }

  const std::string conninfo_;
  const LeaderSessionOptions options_;
  absl::Mutex mu_;
  std::map<SessionKey, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

int64_t PgLeaderLockKey(std::string_view role) {
  if (role == kSchedulerLeaderRole) return kSchedulerLockKey;
  // Other roles: FNV-1a of the name, kept non-negative so that it reads the same in pg_locks.
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : absl::StrCat("tessera-leader/", std::string(role))) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return static_cast<int64_t>(hash & 0x7fffffffffffffffULL);
}

std::shared_ptr<LeaderLockStore> MakePgLeaderLockStore(std::string conninfo,
                                                       LeaderSessionOptions options) {
  return std::make_shared<PgLeaderLockStore>(std::move(conninfo), options);
}

absl::Status CheckFence(pqxx::work& tx, const std::optional<WriteFence>& fence) {
  if (!fence) return absl::OkStatus();
  const pqxx::result r =
      tx.exec_params("SELECT epoch FROM leader_terms WHERE role = $1 FOR SHARE", fence->role);
  if (r.empty()) return StaleTermError(*fence, std::nullopt);
  const auto current = r[0][0].as<int64_t>();
  if (current != fence->epoch) return StaleTermError(*fence, current);
  return absl::OkStatus();
}

}  // namespace tessera::store
