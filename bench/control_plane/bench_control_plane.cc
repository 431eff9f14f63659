// The control plane at cluster scale (issue 14): tessera-server and a real PostgreSQL (fsync
// on, as in production) against N simulated nodes (tests/support/sim_fleet.h: real gRPC control
// streams with a node key each, heartbeats at the production interval, attempts that start, push
// their logs and finish), with runs submitted at a steady rate and nodes killed halfway. Prints,
// per N: the control plane's CPU and memory, PostgreSQL's CPU, commits and rows written per
// second, heartbeat round trips, submit-to-start, the time to declare a killed node lost, and
// the cost per node against the smallest N of the same run (the bound: cost per node should not
// grow with N).
//
//   bench_control_plane [--nodes 1000,5000,10000] [--seconds 30] [--rate 20] [--kill 3]
//                       [--flood]   (each size twice: quiet, then while one user floods)
//                       [--follows F] [--watches W]  (each size twice: quiet, then with F log
//                                       follows and W run watches open through the REST gateway)
//                       [--channels 32] [--lines 20] [--size-every SECONDS]
//                       [--logs-database] [-- SERVER FLAGS...]
//
// --logs-database: rank output in a second database of the same PostgreSQL
// (--logs-database-url), the rest in the first; the database's figures are of both.
//
// A soak of the retention: --size-every 60 -- --run-retention-days 0.002 samples the database's
// size each minute while runs older than about three minutes are deleted.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/scale_harness.h"

namespace {

int BadFlags(const std::string& why) {
  std::cerr << "bench_control_plane: " << why << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {1000, 5000, 10000};
  bool flood = false;
  int follows = 0, watches = 0;
  tessera::testing::ScaleOptions base;
  base.durable_database = true;
  base.check_logs_of = 200;
  base.fleet.channels = 32;
  base.kill_nodes = 3;
  int seconds = 30, rate = 20, size_every = 0;
  CLI::App app{"bench_control_plane: the control plane at cluster scale"};
  app.add_option("--nodes", sizes, "cluster sizes, comma-separated (default 1000,5000,10000)")
      ->delimiter(',');
  app.add_option("--seconds", seconds, "the measured window of each size")->capture_default_str();
  app.add_option("--rate", rate, "runs submitted per second")->capture_default_str();
  app.add_option("--kill", base.kill_nodes, "nodes killed halfway")->capture_default_str();
  app.add_flag("--flood", flood, "each size twice: quiet, then while one user floods");
  app.add_option("--follows", follows,
                 "each size twice: quiet, then with this many log follows open through the REST "
                 "gateway")
      ->capture_default_str();
  app.add_option("--watches", watches, "and this many run watches")->capture_default_str();
  app.add_option("--channels", base.fleet.channels,
                 "gRPC channels the simulated nodes' streams share (0: 1)")
      ->capture_default_str();
  app.add_option("--lines", base.fleet.log_lines_per_rank, "log lines each simulated rank pushes")
      ->capture_default_str();
  auto* size_every_flag =
      app.add_option("--size-every", size_every,
                     "a soak: sample the database's size every this many seconds, and read no "
                     "logs back (0: 1)");
  app.add_flag("--logs-database", base.logs_database,
               "rank output in a second database of the same PostgreSQL (--logs-database-url)");
  app.footer("-- SERVER FLAGS...: the rest of the command line is tessera-server's");
  // What follows "--" is passed on unread, so CLI11 sees only what comes before it.
  char** const separator = std::find(argv + 1, argv + argc, std::string_view("--"));
  base.server_flags.assign(separator == argv + argc ? separator : separator + 1, argv + argc);
  CLI11_PARSE(app, static_cast<int>(separator - argv), argv);
  for (int n : sizes) {
    if (n < 10) return BadFlags("--nodes: numbers of at least 10");
  }
  if (seconds < 0 || rate < 0 || base.kill_nodes < 0 || follows < 0 || watches < 0 ||
      base.fleet.channels < 0 || base.fleet.log_lines_per_rank < 0 || size_every < 0) {
    return BadFlags(
        "need --seconds, --rate, --kill, --follows, --watches, --channels, --lines and "
        "--size-every >= 0");
  }
  base.measure = absl::Seconds(seconds);
  base.submit_rate = rate;
  base.fleet.channels = std::max(base.fleet.channels, 1);
  if (size_every_flag->count() > 0) {
    // Logs are not read back at the end: the retention, set with the server flags, deletes
    // runs while it goes.
    base.database_size_every = absl::Seconds(std::max(size_every, 1));
    base.check_logs_of = -1;
  }
  if (base.logs_database && base.database_size_every > absl::ZeroDuration()) {
    return BadFlags("--size-every samples one database: not with --logs-database");
  }
  // Every node is a stream at the server: leave room for the files and threads.
  const auto streams = static_cast<rlim_t>(follows + watches);
  rlimit files{65536 + streams, 65536 + streams};
  setrlimit(RLIMIT_NOFILE, &files);

  double bound_per_node = 0;
  for (int n : sizes) {
    tessera::testing::ScaleOptions o = base;
    o.nodes = n;
    o.connect_spread = absl::Milliseconds(std::max(1000, n));  // about 1,000 nodes a second
    auto report = tessera::testing::RunScale(o);
    if (!report.ok()) {
      std::cerr << "nodes " << n << ": " << report.status() << "\n";
      return 1;
    }
    if (follows + watches > 0) {
      // The same again with the streams open: the first run is the bound.
      o.log_follows = follows;
      o.run_watches = watches;
      auto held = tessera::testing::RunScale(o);
      if (!held.ok()) {
        std::cerr << "nodes " << n << " with " << follows << " follows and " << watches
                  << " watches: " << held.status() << "\n";
        return 1;
      }
      std::cout << "quiet:\n"
                << tessera::testing::FormatScaleReport(*report) << "with " << follows
                << " log follows and " << watches << " run watches open:\n"
                << tessera::testing::FormatScaleReport(*held)
                << "  ratios, held / quiet: heartbeat round trip p99 "
                << held->heartbeat_rtt_p99_ms / report->heartbeat_rtt_p99_ms
                << ", submit-to-start p99 "
                << held->submit_to_start_p99_ms / report->submit_to_start_p99_ms
                << " (target <= 1.1 each); control plane threads " << held->server_threads << " / "
                << report->server_threads << " quiet, cores " << held->server_cores << " / "
                << report->server_cores << "; memory per stream "
                << static_cast<double>(held->server_rss_bytes - report->server_rss_bytes) / 1024 /
                       static_cast<double>(follows + watches)
                << " KiB\n"
                << std::flush;
      continue;
    }
    if (flood) {
      // The same again while mallory floods: the first run is the bound.
      o.flooders = 2;
      auto flooded = tessera::testing::RunScale(o);
      if (!flooded.ok()) {
        std::cerr << "nodes " << n << " flooded: " << flooded.status() << "\n";
        return 1;
      }
      std::cout << "quiet:\n"
                << tessera::testing::FormatScaleReport(*report) << "while mallory floods:\n"
                << tessera::testing::FormatScaleReport(*flooded)
                << "  ratios, flooded / quiet: others' submit-to-start p50 "
                << flooded->submit_to_start_p50_ms / report->submit_to_start_p50_ms << ", p99 "
                << flooded->submit_to_start_p99_ms / report->submit_to_start_p99_ms
                << " (target: about 1, within the noise between runs); heartbeat p99 "
                << flooded->heartbeat_rtt_p99_ms / report->heartbeat_rtt_p99_ms
                << "; control plane cores " << flooded->server_cores / report->server_cores << "\n"
                << std::flush;
      continue;
    }
    std::cout << tessera::testing::FormatScaleReport(*report);
    const double per_node = (report->server_cores + report->database_cores) / n;
    if (bound_per_node == 0) bound_per_node = per_node;
    double worst_lost = 0;
    for (double ms : report->lost_after_ms) worst_lost = std::max(worst_lost, ms);
    std::cout << "  ratios: control plane + database cost per node / at " << sizes.front()
              << " nodes = " << per_node / bound_per_node
              << " (target: does not grow); control plane cores / 1 core = " << report->server_cores
              << " (target < 1); worst time to lost / 3 s = " << worst_lost / 3000
              << " (target <= 1); submit-to-start p99 / 1 s = "
              << report->submit_to_start_p99_ms / 1000 << " (target < 1)\n"
              << std::flush;
  }
  return 0;
}
