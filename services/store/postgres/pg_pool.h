#pragma once
// A small pool of PostgreSQL connections that turns database trouble into absl::Status:
// an unreachable or restarted server is UNAVAILABLE (and the pool reconnects on the next call),
// a unique-key clash is ALREADY_EXISTS, anything else INTERNAL. It never throws.

#include <functional>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "services/store/transaction_observer.h"

namespace tessera::store {

class PgPool {
 public:
  // `conninfo`: a libpq URL or key=value string. At most `size` connections are open at once;
  // user traffic (store::TrafficClass, per thread) uses at most `size - reserved_for_control`
  // of them and yields to control traffic waiting for one.
  // `observer` (may be null) is told of every transaction.
  PgPool(std::string conninfo, int size, int connect_timeout_seconds, int reserved_for_control = 0,
         std::shared_ptr<TransactionObserver> observer = nullptr);
  ~PgPool();

  // Runs `body` in one transaction and commits it when `body` returns OK (rolls back otherwise).
  // A connection found broken before anything was committed is replaced and `body` is retried
  // once, so a server restart between two calls is invisible to the caller.
  absl::Status Transact(const char* what, const std::function<absl::Status(pqxx::work&)>& body);

  const std::string& conninfo() const { return conninfo_; }

 private:
  struct Lease {
    std::unique_ptr<pqxx::connection> connection;
    bool reused = false;
  };
  absl::StatusOr<Lease> Acquire(const char* what, bool user);
  void Release(std::unique_ptr<pqxx::connection> connection, bool user);
  void Discard(bool user);
  bool CanTake(bool user) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string conninfo_;
  const std::shared_ptr<TransactionObserver> observer_;
  const int size_;
  const int user_limit_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  int user_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  int control_waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

// Adds the parameter `key`=`value` to a libpq URL or key=value string unless it already sets
// `key` (the operator's own setting wins).
std::string WithConnParam(const std::string& conninfo, const std::string& key,
                          const std::string& value);
// WithConnParam for connect_timeout.
std::string WithConnectTimeout(const std::string& conninfo, int seconds);

// A PostgreSQL array literal ("{...}") of the given strings, quoted and escaped.
std::string PgTextArray(const std::vector<std::string>& values);
// A PostgreSQL array literal of numbers (int[], bigint[], smallint[]).
template <typename Number = int>
std::string PgIntArray(const std::vector<Number>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}

}  // namespace tessera::store
