#pragma once
// A local Tessera cluster for integration tests, all real: a private PostgreSQL, tessera-server
// and tessera-worker processes with simulated GPUs, each worker with its own state folder.
// Ranks leave marker files (their pid, start time) in a folder the test reads.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/v1/logs.grpc.pb.h"
#include "tests/support/control_plane.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {

struct WorkerHandle {
  std::string name;
  std::string state_dir;
  std::string key_file;  // its node key (mode 600)
  std::unique_ptr<Process> process;
};

class LocalCluster {
 public:
  // Server flags default to the production lease (3 s) and heartbeat (0.5 s).
  explicit LocalCluster(std::vector<std::string> server_flags = {});
  // Over a database the test set up (`database_url` may name several hosts, e.g. a primary and
  // its standby); `pg` is its primary.
  LocalCluster(std::unique_ptr<PostgresServer> pg, std::string database_url,
               std::vector<std::string> server_flags = {});
  ~LocalCluster();

  // Starts (or restarts, with the same state folder) worker `name` and waits until it is online.
  // `scheduler_endpoint` overrides the server's (e.g. a proxy in between); `env` (NAME=VALUE)
  // is added to the worker's environment (e.g. a preloaded library that steps its clock).
  WorkerHandle& StartWorker(const std::string& name, int gpus = 2,
                            std::vector<std::string> extra = {},
                            const std::string& scheduler_endpoint = "",
                            const std::vector<std::string>& env = {});
  WorkerHandle& worker(const std::string& name);
  v1::Node Node(const std::string& name);
  // Waits until the node has `liveness`; returns how long that took.
  absl::Duration WaitForLiveness(const std::string& name, v1::NodeLiveness liveness,
                                 absl::Duration timeout = absl::Seconds(15));

  // Submits `command` on `nodes` nodes with `gpus` GPUs in all; MARKS points at marks_dir().
  // Launched once per rank unless `launch` says otherwise: these tests are of what Tessera knows
  // and does per rank (a run's YAML without `launch` is launched once per node).
  v1::Run Submit(const std::string& name, const std::string& command, int gpus, int nodes,
                 bool retry = false, v1::LaunchMode launch = v1::LAUNCH_MODE_RANK);
  // The folder ranks write markers to, and one marker's content once it exists.
  const std::string& marks_dir() const { return marks_; }
  std::optional<std::string> WaitForMark(const std::string& file,
                                         absl::Duration timeout = absl::Seconds(20));
  // The pid a rank wrote to marker `file` (`echo $$ > "$MARKS/file"`), once it exists.
  pid_t PidMark(const std::string& file);
  // Every stored line of a run's rank (stdout and stderr, in time order), through GetLogs on
  // `endpoint` (default: tessera-server's).
  std::vector<v1::LogLine> Logs(const std::string& run_name, std::optional<int> rank,
                                const std::string& endpoint = "");
  // The same lines as text, one per line.
  std::string LogText(const std::string& run_name, std::optional<int> rank);
  // Runs the mcli binary against this cluster with the admin key (no config file).
  ShellResult Mcli(const std::string& args);
  // A rank's spooled output on its worker.
  std::string SpoolOf(const std::string& worker, const std::string& run_id, int resumption,
                      int rank, const std::string& stream = "stdout");

  std::unique_ptr<PostgresServer> pg;
  std::string database_url;  // what tessera-server connects with
  ServerProcess server;
  // Where Mcli sends its calls (empty: `server`); e.g. several instances, a:1,b:2.
  std::string api_endpoint;
  std::string admin_key, system_key;
  std::unique_ptr<Client> client;

 private:
  TempDir root_{"tessera-cluster"};  // workers' state folders, markers; outlives the workers
  std::string marks_;
  std::vector<std::unique_ptr<WorkerHandle>> workers_;
};

// True while any process of group `pgid` is alive (zombies do not count).
bool GroupAlive(pid_t pgid);
// Unix time in nanoseconds, as `date +%s%N` prints it.
int64_t NowNanos();

}  // namespace tessera::testing
