#include "services/store/postgres/pg_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/store/store_error.h"
#include "services/store/traffic_class.h"

namespace tessera::store {
namespace {

// SQLSTATE classes that mean the server went away or is not accepting work right now.
bool IsUnavailableSqlState(const std::string& state) {
  return absl::StartsWith(state, "08") ||  // connection exception
         state == "57P01" ||               // admin_shutdown
         state == "57P02" ||               // crash_shutdown
         state == "57P03" ||               // cannot_connect_now
         state == "53300";                 // too_many_connections
}

enum class Failure { kRetryable, kFinal };

// The database's error kind, as TransactionObserver names it.
std::string_view ErrorKind(const absl::Status& status, bool in_doubt) {
  if (in_doubt) return "in_doubt";
  if (absl::IsUnavailable(status)) return "unavailable";
  if (absl::IsAlreadyExists(status)) return "unique_violation";
  return "internal";
}

// Tells the observer (if any) of one Transact call when it returns.
class TransactionTimer {
 public:
  TransactionTimer(TransactionObserver* observer, const char* what)
      : observer_(observer), what_(what), start_(std::chrono::steady_clock::now()) {}
  ~TransactionTimer() {
    if (observer_ == nullptr) return;
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
    observer_->TransactionEnded(what_, took.count(), error_kind_);
  }
  // The database failed this call (not the caller's own body).
  absl::Status Failed(absl::Status status, bool in_doubt = false) {
    error_kind_ = ErrorKind(status, in_doubt);
    return status;
  }

 private:
  TransactionObserver* observer_;
  std::string_view what_;
  std::string_view error_kind_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::string WithConnParam(const std::string& conninfo, const std::string& key,
                          const std::string& value) {
  if (absl::StrContains(conninfo, key + "=")) return conninfo;
  const bool is_url =
      absl::StartsWith(conninfo, "postgresql://") || absl::StartsWith(conninfo, "postgres://");
  if (is_url) {
    return absl::StrCat(conninfo, absl::StrContains(conninfo, "?") ? "&" : "?", key, "=", value);
  }
  return absl::StrCat(conninfo, " ", key, "=", value);
}

std::string WithConnectTimeout(const std::string& conninfo, int seconds) {
  return WithConnParam(conninfo, "connect_timeout", absl::StrCat(seconds));
}

std::string PgTextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += "}";
  return out;
}

PgPool::PgPool(std::string conninfo, int size, int connect_timeout_seconds,
               int reserved_for_control, std::shared_ptr<TransactionObserver> observer)
    : conninfo_(WithConnectTimeout(conninfo, connect_timeout_seconds)),
      observer_(std::move(observer)),
      size_(size > 0 ? size : 1),
      // User traffic always gets at least one connection.
      user_limit_(std::max(1, size_ - std::max(0, reserved_for_control))) {}

PgPool::~PgPool() = default;

bool PgPool::CanTake(bool user) const {
  const bool free = !idle_.empty() || open_ < size_;
  if (!user) return free;
  return free && user_in_use_ < user_limit_ && control_waiting_ == 0;
}

absl::StatusOr<PgPool::Lease> PgPool::Acquire(const char* what, bool user) {
  {
    absl::MutexLock lock(&mu_);
    if (!user) ++control_waiting_;
    struct Want {
      PgPool* pool;
      bool user;
    } want{this, user};
    mu_.Await(absl::Condition(
        +[](Want* w) ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->pool->CanTake(w->user); }, &want));
    if (!user) --control_waiting_;
    if (user) ++user_in_use_;
    if (!idle_.empty()) {
      Lease lease{std::move(idle_.back()), true};
      idle_.pop_back();
      return lease;
    }
    ++open_;  // reserve a slot, connect outside the lock
  }
  try {
    auto conn = std::make_unique<pqxx::connection>(conninfo_);
    // Bounds on every session: a statement never runs past a minute, and a transaction left
    // open by a process that froze mid-way (SIGSTOP, a pause) cannot hold its row locks for
    // long: it would otherwise keep a new leader's term from beginning (leader_terms).
    pqxx::nontransaction(*conn).exec(
        "SET statement_timeout = '60s'; SET idle_in_transaction_session_timeout = '5s'");
    return Lease{std::move(conn), false};
  } catch (const std::exception& e) {
    Discard(user);
    return StoreError(
        absl::UnavailableError(absl::StrCat("database unavailable while ", what, ": ", e.what())));
  }
}

void PgPool::Release(std::unique_ptr<pqxx::connection> connection, bool user) {
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(connection));
  if (user) --user_in_use_;
}

void PgPool::Discard(bool user) {
  absl::MutexLock lock(&mu_);
  --open_;
  if (user) --user_in_use_;
}

absl::Status PgPool::Transact(const char* what,
                              const std::function<absl::Status(pqxx::work&)>& body) {
  const bool user = current_traffic_class == TrafficClass::kUser;
  TransactionTimer timer(observer_.get(), what);
  for (int attempt = 0;; ++attempt) {
    auto lease = Acquire(what, user);
    if (!lease.ok()) return timer.Failed(lease.status());
    std::unique_ptr<pqxx::connection> conn = std::move(lease->connection);
    absl::Status failure;
    Failure kind = Failure::kFinal;
    bool in_doubt = false;
    try {
      pqxx::work tx(*conn);
      absl::Status st = body(tx);
      if (st.ok()) {
        tx.commit();
      } else {
        tx.abort();
      }
      Release(std::move(conn), user);
      return st;
    } catch (const pqxx::in_doubt_error& e) {
      // The connection broke during COMMIT: it may or may not have happened. Never retry.
      failure = StoreError(
          absl::UnavailableError(absl::StrCat("database connection lost while committing ", what,
                                              "; the outcome is unknown: ", e.what())));
      in_doubt = true;
    } catch (const pqxx::broken_connection& e) {
      failure = StoreError(absl::UnavailableError(
          absl::StrCat("database unavailable while ", what, ": ", e.what())));
      kind = Failure::kRetryable;
    } catch (const pqxx::unique_violation& e) {
      Release(std::move(conn), user);
      return timer.Failed(StoreError(
          absl::AlreadyExistsError(absl::StrCat(what, ": already exists (", e.what(), ")"))));
    } catch (const pqxx::sql_error& e) {
      if (IsUnavailableSqlState(e.sqlstate())) {
        failure = StoreError(absl::UnavailableError(
            absl::StrCat("database unavailable while ", what, ": ", e.what())));
        kind = Failure::kRetryable;
      } else if (conn->is_open()) {
        Release(std::move(conn), user);
        return timer.Failed(StoreError(
            absl::InternalError(absl::StrCat("database error while ", what, ": ", e.what()))));
      } else {
        failure = StoreError(absl::UnavailableError(
            absl::StrCat("database unavailable while ", what, ": ", e.what())));
        kind = Failure::kRetryable;
      }
    } catch (const std::exception& e) {
      if (conn->is_open()) {
        Release(std::move(conn), user);
        return timer.Failed(StoreError(
            absl::InternalError(absl::StrCat("database error while ", what, ": ", e.what()))));
      }
      failure = StoreError(absl::UnavailableError(
          absl::StrCat("database unavailable while ", what, ": ", e.what())));
      kind = Failure::kRetryable;
    }
    // The connection is unusable: drop it. A stale pooled connection (the server restarted
    // since it was opened) earns one retry on a fresh connection.
    conn.reset();
    Discard(user);
    if (kind == Failure::kRetryable && lease->reused && attempt == 0) {
      spdlog::info("database connection was broken ({}); reconnecting",
                   std::string(failure.message()));
      continue;
    }
    return timer.Failed(failure, in_doubt);
  }
}

}  // namespace tessera::store
