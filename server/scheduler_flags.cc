#include "server/scheduler_flags.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace tessera::server {

void AddSchedulerFlags(CLI::App& app, SchedulerFlags& f) {
  app.add_option("--lease-seconds", f.lease_seconds,
                 "the workers' lease: a worker kills its ranks before it ends unrenewed; a node "
                 "that has not heartbeat for this long is lost (unless --loss-seconds is shorter). "
                 "With standby schedulers, 10 or more: the time to find a new leader")
      ->capture_default_str()
      ->check(CLI::Range(0.2, 3600.0));
  app.add_option("--loss-seconds", f.loss_seconds,
                 "a node this leader has heard from is lost once silent this long, at most the "
                 "lease (0: the lease); a node that missed one heartbeat gets no new work")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--heartbeat-seconds", f.heartbeat_seconds, "how often workers heartbeat")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 600.0));
  app.add_option("--stop-grace-seconds", f.stop_grace_seconds, "SIGTERM to SIGKILL for ranks")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--max-clock-skew-seconds", f.max_clock_skew_seconds,
                 "a node whose wall clock is further than this from the control plane's fails "
                 "its pre-flight checks before a run starts there (0: not checked)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--shrink-after-seconds", f.shrink_after_seconds,
                 "a requeued run that accepts fewer nodes (compute.min_nodes) waits this long "
                 "for all of its nodes, then resumes on those it can have")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--spare-nodes-per-pool", f.spare_nodes_per_pool,
                 "idle nodes of each pool (cluster, GPU type, GPUs per node) kept as hot spares: "
                 "warmed with the images of the pool's running runs and their pre-flight checks, "
                 "nothing placed on them but a run resuming after a node fault (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_flag("--require-node-terms", f.require_node_terms,
               "refuse a node whose join token or node key does not fix its cluster and GPU "
               "type (their terms): no node's own word decides the pool it is in");
  app.add_option("--fair-share-half-life", f.fair_share_half_life,
                 "fair share: GPU time used this long ago counts half (e.g. 24h, 168h)")
      ->capture_default_str()
      ->check([](const std::string& text) -> std::string {
        absl::Duration d;
        if (!absl::ParseDuration(text, &d) || d < absl::Minutes(1) || d > absl::Hours(24 * 365)) {
          return "expected a duration from 1m to 8760h, such as 24h or 168h";
        }
        return "";
      });
}

absl::StatusOr<SchedulerOptions> FinishSchedulerFlags(const SchedulerFlags& f) {
  if (f.loss_seconds > f.lease_seconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loss-seconds ", f.loss_seconds, " is longer than --lease-seconds ", f.lease_seconds,
        ": a node's ranks would outlive its loss by more than the lease they are fenced by"));
  }
  if (f.loss_seconds > 0 && f.loss_seconds <= f.heartbeat_seconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loss-seconds ", f.loss_seconds, " is not longer than --heartbeat-seconds ",
        f.heartbeat_seconds, ": every live node would be declared lost between two beats"));
  }
  SchedulerOptions o;
  o.lease = absl::Seconds(f.lease_seconds);
  o.loss_after = absl::Seconds(f.loss_seconds);
  o.heartbeat_interval = absl::Seconds(f.heartbeat_seconds);
  o.stop_grace = absl::Seconds(f.stop_grace_seconds);
  o.max_clock_skew = absl::Seconds(f.max_clock_skew_seconds);
  o.require_node_terms = f.require_node_terms;
  o.shrink_after = absl::Seconds(f.shrink_after_seconds);
  o.spares_per_pool = f.spare_nodes_per_pool;
  (void)absl::ParseDuration(f.fair_share_half_life, &o.fair_share_half_life);  // checked
  return o;
}

}  // namespace tessera::server
