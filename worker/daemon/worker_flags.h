#pragma once
// tessera-worker's flags and how they become the worker's options: registered on the command
// line (AddWorkerFlags), then checked and loaded in one pass before anything starts
// (FinishWorkerFlags: transport, credentials (joining with a token where asked), the node's
// labels and limits, the ranks' identity, environment and sandbox). main.cc only composes them.

#include "base/cli_app_fwd.h"
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/daemon/node_credentials.h"
#include "worker/daemon/sandbox_flags.h"
#include "worker/daemon/worker_daemon.h"

namespace tessera::worker {

// The flags as given, before they are checked.
struct WorkerFlags {
  WorkerOptions options;  // the flags that are options as they stand
  std::string api_key_file;
  std::string join_token_file;
  std::string credentials_dir;  // default: STATE_DIR/credentials
  std::string join_endpoint;    // default: the scheduler's
  std::string rank_user;
  std::string log_level = "info";
  std::vector<std::string> labels;    // KEY=VALUE
  std::vector<std::string> rank_env;  // KEY=VALUE
  std::vector<std::string> network_walls;
  int fence_margin_ms = 500;
  int finish_log_wait_ms = 5000;
  int procs_per_node = 0;
  double keep_finished_hours = 24;
  std::string min_free_disk = "1GiB";
  std::string min_shm = "64MiB";
  double preflight_timeout_seconds = 30;
  SandboxFlags sandbox;
};

// Registers every flag of tessera-worker on `app`, into `flags` (the node name defaults to the
// host's name, the state folder to /var/lib/tessera-worker).
void AddWorkerFlags(CLI::App& app, WorkerFlags& flags);

// What the worker starts with.
struct WorkerSetup {
  WorkerOptions options;
  // The credentials a join gave (kept in --credentials-dir), whose certificate the control
  // plane renews; nullopt with --api-key-file.
  std::optional<CredentialFiles> joined;
  std::string join_endpoint;
};

// Checks and loads the flags: plain text only to loopback (checked before any secret is sent),
// the node's key (read from its file, or got by joining once), its certificate, then
// ApplyNodeFlags and the sandbox's. One error naming the flag that is wrong.
absl::StatusOr<WorkerSetup> FinishWorkerFlags(WorkerFlags flags);

// The node's own settings into `o`: the ranks' user, labels, environment, network walls, fence
// margin, pre-flight limits, the folders' retention, ranks per node and the sandbox's flags.
absl::Status ApplyNodeFlags(const WorkerFlags& flags, WorkerOptions& o);

}  // namespace tessera::worker
