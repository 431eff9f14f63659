#pragma once
// The control plane at scale: a private PostgreSQL, tessera-server as a process, and a SimFleet
// of N nodes (each with its own node key) that runs attempts, pushes logs and heartbeats; runs
// are submitted at a steady rate and some nodes are killed. Measures what bench/control_plane
// prints and what its small CTest version asserts.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/sim_fleet.h"
#include "tests/support/submit_flood.h"

namespace tessera::testing {

struct ScaleOptions {
  int nodes = 200;
  int gpus_per_node = 8;
  // Connecting every node is spread over this long.
  absl::Duration connect_spread = absl::Seconds(2);
  // After every node registered, before measuring.
  absl::Duration warm_up = absl::Seconds(3);
  absl::Duration measure = absl::Seconds(30);
  // Runs submitted per second while measuring (each takes one node's GPUs).
  double submit_rate = 5;
  // Nodes killed halfway through (their time to be declared lost is measured).
  int kill_nodes = 2;
  // PostgreSQL durable as in production (fsync on) or quick (a test's).
  bool durable_database = false;
  // Attempts whose logs are read back and checked (0: every one; negative: none, as in a soak
  // whose retention deletes runs while it goes).
  int check_logs_of = 0;
  // How often the database's size is sampled while measuring (zero: at the end only).
  absl::Duration database_size_every = absl::ZeroDuration();
  // Rank output in a second database of the same PostgreSQL (--logs-database-url); the
  // commits, rows and size reported are of both. Not with database_size_every.
  bool logs_database = false;
  // Clients of one more user ("mallory") that submit runs of a node's GPUs back to back while
  // measuring, as fast as the server answers (past her waiting-run limit, each is refused): the
  // figures of the steady runs, another user's, say what her flood costs others.
  int flooders = 0;
  // Clients that follow one run's logs through the REST gateway (Server-Sent Events) for the
  // whole window, opened before it: what open follows cost the control plane's own work. The run
  // is held running by the fleet; the server's per-user stream limit is raised to fit them.
  int log_follows = 0;
  // Watches of the runs' changes through the REST gateway, opened before the window, as a user
  // ("wendy") who has no runs: what open watches cost, not what they are sent.
  int run_watches = 0;
  std::vector<std::string> server_flags;
  SimFleetOptions fleet;
};

struct ScaleReport {
  int nodes = 0;
  double seconds = 0;
  // The control plane (tessera-server) and PostgreSQL over the measured window.
  double server_cores = 0;
  int64_t server_rss_bytes = 0;
  // The server's threads at the window's end.
  int server_threads = 0;
  // Follows open at the window's start and still open at its end (ScaleOptions::log_follows).
  int follows_open = 0, follows_open_at_end = 0;
  // The same of the watches (ScaleOptions::run_watches).
  int watches_open = 0, watches_open_at_end = 0;
  double database_cores = 0;
  double commits_per_second = 0;
  double rows_written_per_second = 0;
  int64_t database_bytes = 0;
  // The database over the window: seconds from its start, size, runs and log chunks stored,
  // and chunks of runs that no longer exist (logs that outlived their run: none is right).
  struct DatabaseSample {
    double at_seconds = 0;
    int64_t bytes = 0, runs = 0, log_chunks = 0, orphan_log_chunks = 0;
  };
  std::vector<DatabaseSample> database_samples;
  double heartbeat_rtt_p50_ms = 0, heartbeat_rtt_p99_ms = 0;
  int64_t heartbeats = 0;
  // Between a node's successive heartbeats, as the simulator sent them (its own lateness).
  double heartbeat_gap_p99_ms = 0, heartbeat_gap_max_ms = 0;
  double submit_to_start_p50_ms = 0, submit_to_start_p99_ms = 0;
  FloodCounts flood;  // mallory's submits (ScaleOptions::flooders)
  int runs_submitted = 0;
  int attempts_started = 0;
  int attempts_finished = 0;
  int starts_sent_again = 0;
  // Per killed node: from its last heartbeat to the LOST event.
  std::vector<double> lost_after_ms;
  // Nodes declared lost that were not killed.
  std::vector<std::string> falsely_lost;
  // Runs whose attempt never started, or started and never finished.
  std::vector<std::string> not_started, not_finished;
  int64_t lines_pushed = 0, lines_read = 0;
  // Attempts whose logs read back differ from what was pushed (missing or duplicate lines).
  std::vector<std::string> log_mismatches;
  int64_t log_push_failures = 0;
  int64_t streams_dropped = 0;
  std::vector<std::string> drop_reasons;  // "node: CODE: message"
  // GET /metrics of the control plane after the window (every node known): the time from the
  // request to the end of the answer, over several scrapes, and the answer's size.
  double metrics_scrape_p50_ms = 0, metrics_scrape_max_ms = 0;
  int64_t metrics_bytes = 0;
};

absl::StatusOr<ScaleReport> RunScale(const ScaleOptions& options);

// The report as the benchmark prints it (one line per figure).
std::string FormatScaleReport(const ScaleReport& r);

}  // namespace tessera::testing
