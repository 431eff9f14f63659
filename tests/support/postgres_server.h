#pragma once
// A private PostgreSQL server for integration tests: initdb into a temporary folder, a free
// port on 127.0.0.1, run as the `postgres` user when the test runs as root, removed afterwards.
// It drives deploy/pg-instance.sh, the same script the quick start uses.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::testing {

class PostgresServer {
 public:
  // `ephemeral` trades durability for speed (fsync and synchronous commits off): for tests that
  // do not lose the machine or replicate.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start(bool ephemeral = true);
  // A streaming standby of `primary` (pg_basebackup), read-only until Promote().
  static absl::StatusOr<std::unique_ptr<PostgresServer>> StartStandby(
      const PostgresServer& primary);
  ~PostgresServer();

  // postgresql://tessera@127.0.0.1:PORT/tessera
  const std::string& url() const { return url_; }
  int port() const { return port_; }

  // Stops the server (fast shutdown: clients are disconnected) and starts it again on the same
  // port with the same data.
  absl::Status Stop();
  absl::Status Resume();
  // Kills the server at once (immediate shutdown: no checkpoint, as in a crash).
  absl::Status Kill();
  // A standby becomes a primary that takes writes.
  absl::Status Promote();
  // On a primary: each commit waits until a standby has it (synchronous replication).
  absl::Status SetSynchronousReplication(bool on);

  // Drops and recreates the `tessera` database, for a clean slate between test cases.
  absl::Status ResetDatabase();
  // Creates another database on this server (for a store of its own); returns its URL.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name);

 private:
  explicit PostgresServer(std::string dir) : dir_(std::move(dir)) {}
  static absl::StatusOr<std::unique_ptr<PostgresServer>> StartWith(const std::string& command,
                                                                   const std::string& args);
  absl::Status RunScript(const std::string& args, std::string* output = nullptr);

  std::string dir_;
  bool ephemeral_ = true;
  std::string url_;
  int port_ = 0;
};

// One server per test process, started on first use and removed at exit. Tests that use it
// call ResetDatabase() first.
PostgresServer& SharedPostgres();

}  // namespace tessera::testing
