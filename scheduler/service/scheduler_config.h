#pragma once
// The scheduler service's settings, shared by its roles.

#include <algorithm>
#include <string_view>

#include "absl/time/time.h"

namespace tessera::scheduler {

// A node label set by `tessera-worker --procs-per-node N`: ranks per node for runs that use no
// GPUs there and do not set compute.procs_per_node.
inline constexpr std::string_view kProcsPerNodeLabel = "tessera.io/procs-per-node";

// The leases a leader keeps (lease_table.h).
struct LeaseTerms {
  absl::Duration fence;  // the workers' lease (SchedulerConfig::lease)
  absl::Duration loss;   // at most `fence`
  absl::Duration suspect = absl::InfiniteDuration();
};

struct SchedulerConfig {
  // A node whose worker has not heartbeat for this long is lost. With a beat a second, 2.8 s
  // survives one lost beat with the next up to 0.8 s late (3 s: up to 1 s); two lost in a row
  // end either (the third beat is due at 3 s, too late for both). It leaves 0.2 s for the last
  // beat's way in and the cycle, so that a dead node is declared within 3 s of its last
  // heartbeat (bench/control_plane).
  // It is also the workers' fence lease: a worker kills its ranks before it ends unrenewed. With
  // standby schedulers it must outlast a takeover (10 s or more), and `loss_after` keeps the
  // detection of a dead node fast.
  absl::Duration lease = absl::Milliseconds(2800);
  // A node this leader has heard from is lost once silent this long, however long the fence
  // lease (zero: the lease). Nodes a new leader adopts get the whole lease to find it. A node lost
  // before its fence fired may still run ranks until it does, so its worker may not register
  // again with ranks before then (LeaseTable::UntilFenced).
  absl::Duration loss_after = absl::ZeroDuration();
  // The lease, not this, bounds how soon a dead node is found; this sets how late a beat may be
  // (lease minus interval: 1.8 s) before a live node is taken for lost. One a second keeps an idle
  // node and a 10,000-node control plane cheap (bench/control_plane, bench/idle_worker).
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // SIGTERM to SIGKILL for stopped ranks.
  absl::Duration stop_grace = absl::Seconds(10);
  // Flap damping: a node lost this many times within the window is cordoned with the evidence,
  // so that it stops eating every run's retries. An operator uncordons it.
  int flap_threshold = 3;
  absl::Duration flap_window = absl::Minutes(10);
  // How often a live node's last heartbeat is written to the store (for people: leases live in
  // the leader's memory and never wait for the database).
  absl::Duration heartbeat_persist_interval = absl::Seconds(15);
  // Ports for MASTER_PORT are drawn from [base, base + span): below Linux's ephemeral ports
  // (32768 up by default), which any connection on a node may hold at the moment a rank binds
  // its rendezvous port ("Address already in use", seen on a resumed attempt).
  int master_port_base = 29500;
  int master_port_span = 3000;
  // Fair share: GPU-seconds used this long ago count half (Slurm's PriorityDecayHalfLife; its
  // default is 7 days too).
  absl::Duration fair_share_half_life = absl::Hours(24 * 7);
  // A node whose wall clock is further than this from the control plane's fails its pre-flight
  // checks (zero: not checked). NTP keeps nodes within milliseconds; this is for a broken one.
  absl::Duration max_clock_skew = absl::Seconds(10);
  // Refuse a node whose credential (node key or join token) leaves its cluster or GPU type to
  // its own word (v1::NodeTerms): on a shared cluster a node never places itself in a pool.
  bool require_node_terms = false;
  // A run that accepts fewer nodes (compute.min_nodes) and was requeued (a node lost, preempted)
  // waits this long for all of its nodes before it resumes on those it can have; it grows back
  // right after a checkpoint once all are free again.
  absl::Duration shrink_after = absl::Seconds(60);
  // Hot spares (spare_nodes.h): this many idle nodes of each pool (cluster, GPU type, GPUs per
  // node) are kept out of ordinary placement, warmed (pre-flight checks passed, the images of
  // the pool's running runs pulled), for runs resuming after a node fault. 0: none.
  int spares_per_pool = 0;
  // A spare's warm-up not answered this long (its ack lost with a stream) is sent again.
  absl::Duration spare_warm_timeout = absl::Minutes(10);

  absl::Duration LossLease() const {
    return loss_after > absl::ZeroDuration() ? std::min(loss_after, lease) : lease;
  }
  // One beat missed, with half an interval's slack: no new work goes to the node.
  absl::Duration SuspectAfter() const { return heartbeat_interval * 3 / 2; }
  LeaseTerms Leases() const { return {lease, LossLease(), SuspectAfter()}; }

  // How long an ended attempt's unconfirmed nodes keep their GPUs: the stop grace plus a lease
  // (a worker that is alive confirms within the grace; one that is gone is lost within a lease).
  absl::Duration drain_limit() const { return stop_grace + lease; }
};

// A start or stop the worker's heartbeats show it did not get is sent again after two
// heartbeats (desired_attempts.h).
inline absl::Duration ResendAfter(const SchedulerConfig& c) { return 2 * c.heartbeat_interval; }

}  // namespace tessera::scheduler
