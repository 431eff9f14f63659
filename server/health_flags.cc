#include "server/health_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/byte_size.h"
#include "healthcheck/sequential_test.h"

namespace tessera::server {

void AddHealthFlags(CLI::App& app, HealthFlags& f) {
  app.add_option("--sweep-retention-days", f.sweep_retention_days,
                 "remove health sweeps and their results this many days after they started "
                 "(0: keep them)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 36500.0));
  app.add_option("--sweep-interval-seconds", f.sweep_interval_seconds,
                 "sweep the idle nodes this often (0: only on demand and when runs degrade)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 30.0 * 86400));
  app.add_option("--uncordon-after-passes", f.options.uncordon_after_passes,
                 "return a node the health API cordoned after this many passing sweeps in a "
                 "row (0: only an operator uncordons it); a node an operator cordoned stays")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("--confirm-suspects", f.options.confirm_suspects,
                 "measure a node that looks slow again, in turn with peers, until a sequential "
                 "test decides (false: one sweep's figures condemn it)")
      ->capture_default_str();
  app.add_option("--false-condemnation-rate", f.options.false_condemnation_rate,
                 "the chance the sequential test accepts of condemning a healthy suspect")
      ->capture_default_str()
      ->check(CLI::Range(1e-9, 0.1));
  app.add_option("--confirmation-pairs", f.options.confirmation_pairs,
                 "at most this many re-measurements of a suspect beside its peers (at least the "
                 "6 a slow verdict needs); then it is inconclusive, not condemned, and a "
                 "follow-up sweep measures it again")
      ->capture_default_str()
      ->check(CLI::Range(6, 100));
  app.add_option("--canary-compute-seconds", f.options.canary_compute_seconds,
                 "how long each compute stress test measures")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 600.0));
  app.add_option("--canary-compute-threads", f.options.canary_compute_threads,
                 "CPU threads of each compute stress test on CPU nodes (0: all the node's "
                 "cores; 1 where simulated nodes share a machine)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("--canary-timeout-seconds", f.canary_timeout_seconds,
                 "a canary that takes longer counts as a timeout")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--canary-sizes", f.canary_sizes,
                 "all-reduce payloads between CPU nodes (default 1MiB,4MiB,16MiB,64MiB)");
  app.add_option("--canary-ports", f.canary_ports,
                 "FIRST-LAST: the all-reduce canaries' rendezvous ports (default 700-999: below "
                 "1024, only the workers, as root, may bind them, and no run can hold one; a "
                 "worker that is not root needs ports above 1023, which runs could hold)");
  app.add_option("--mfu-drop-reports", f.options.mfu_reports,
                 "progress reports under a run's mfu_threshold before its nodes are swept")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--straggler-factor", f.options.straggler_factor,
                 "a node whose compute time per step is this many times its peers' is swept")
      ->capture_default_str()
      ->check(CLI::Range(1.05, 100.0));
  app.add_option("--move-off-stragglers", f.options.move_off_stragglers,
                 "move a straggler's run off it at once when an idle node of its pool is free or "
                 "the run accepts fewer nodes (false: the run stays until a sweep condemns the "
                 "node)")
      ->capture_default_str();
}

absl::StatusOr<HealthOptions> FinishHealthFlags(HealthFlags f) {
  HealthOptions& o = f.options;
  o.sweep_interval = absl::Seconds(f.sweep_interval_seconds);
  o.sweep_retention = absl::Seconds(f.sweep_retention_days * 86400);
  o.canary_timeout = absl::Seconds(f.canary_timeout_seconds);
  health::SequentialTestConfig test;
  test.alpha = o.false_condemnation_rate;
  test.max_pairs = o.confirmation_pairs;
  if (const std::string error = health::ValidateSequentialTest(test); !error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--false-condemnation-rate/--confirmation-pairs: ", error));
  }
  if (!f.canary_sizes.empty()) {
    auto sizes = ParseByteSizes(f.canary_sizes);
    if (!sizes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--canary-sizes: ", sizes.status().message()));
    }
    o.cpu_payload_bytes = *sizes;
  }
  if (!f.canary_ports.empty()) {
    const std::vector<std::string> ends = absl::StrSplit(f.canary_ports, '-');
    int first = 0, last = 0;
    if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &first) ||
        !absl::SimpleAtoi(ends[1], &last) || first < 1 || last > 65535 || first > last) {
      return absl::InvalidArgumentError(
          absl::StrCat("--canary-ports: \"", f.canary_ports,
                       "\" is not FIRST-LAST (1 <= FIRST <= LAST <= 65535)"));
    }
    o.canary_port_first = first;
    o.canary_port_last = last;
  }
  return o;
}

}  // namespace tessera::server
