#pragma once
// The leader's leases, in memory. A heartbeat renews a lease here and nowhere else, so the
// database is off the training path: a PostgreSQL outage or stall of any length delays no
// renewal, fences no worker and kills no rank. The store learns of a node's liveness only when
// it changes (registered, lost) and, for people, of its last heartbeat now and then
// (NodeLiveness::StoreLastHeartbeats, in one write for all nodes due).
//
// Deadlines are on the injected lease clock, a monotonic one in production: a step of the wall
// clock neither expires a lease early nor keeps a dead node alive.
//
// A new leader holds no leases. The nodes the store lists as online get a whole lease from the
// moment the leader first sees them (Adopt): time for their workers to find it.
//
// Two durations (LeaseTerms). The fence lease is the workers': each kills its ranks before it
// ends unrenewed, and it must outlast a standby's takeover. The loss lease, no longer, is how
// long a node this leader has heard from may be silent before it is declared lost: a dead node
// costs its runs that, not the whole fence lease. A node declared lost before its fence could
// have fired may still have ranks running (a partition, a frozen worker) until that fence ends:
// `UntilFenced` says how long, and its worker may not register again with ranks until then.
// Before the loss, a node silent for one missed beat is suspected (`Suspected`): no new work
// goes to it.

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "scheduler/service/scheduler_config.h"

namespace tessera::scheduler {

struct ExpiredLease {
  std::string node;
  absl::Duration silent_for;  // since the last registration or heartbeat
};

class LeaseTable {
 public:
  LeaseTable(std::shared_ptr<Clock> clock, LeaseTerms terms);
  // Loss and fence the same, no suspicion.
  LeaseTable(std::shared_ptr<Clock> clock, absl::Duration lease)
      : LeaseTable(std::move(clock), LeaseTerms{lease, lease}) {}

  // A worker registered (again): a fresh lease.
  void Grant(const std::string& node);
  // A heartbeat. FAILED_PRECONDITION when the node holds no lease here (it was declared lost,
  // or it never registered with this instance): its worker must register again.
  absl::Status Renew(const std::string& node);
  // Nodes the store lists as online. Each one this table has never seen gets a whole fence lease
  // from now (its worker may be looking for this leader).
  void Adopt(const std::vector<std::string>& online);
  // Leases that ended and whose node is not yet declared lost, by node name.
  std::vector<ExpiredLease> Expired() const;
  // How soon the next live lease ends (InfiniteDuration: none will). The leader's cycle wakes
  // then rather than at its next turn, so that a dead node is declared lost at its lease's end,
  // not up to a cycle later. A lease already ended is not counted: it is the cycle's to handle,
  // and counting it would make the cycle spin while the store refuses the node's LOST.
  absl::Duration UntilNextExpiry() const;
  // The node was declared lost (the store has it): its lease is gone until it registers again.
  void Revoke(const std::string& node);
  // How long until the fence of a node declared lost has surely fired, so that no rank its
  // worker started before the loss still runs (zero: not declared lost, or fenced already).
  // The worker's deadline is at most its last renewal here plus the fence lease.
  absl::Duration UntilFenced(const std::string& node) const;
  // Nodes not declared lost that were silent for the suspicion time or longer (one missed beat),
  // or whose lease ended, by name.
  std::vector<std::string> Suspected() const;
  // A new term of leadership begins: leases kept from an earlier term of this instance say
  // nothing about the nodes now (it did not hear their heartbeats in between), so every node
  // is adopted afresh.
  void Clear();
  // Whether the node holds a live lease (for tests and the node API).
  bool Holds(const std::string& node) const;

 private:
  struct Lease {
    absl::Time renewed;  // on the lease clock
    bool revoked = false;
    bool heard = false;  // granted or renewed here, not only adopted: the loss lease applies
  };
  absl::Duration LengthOf(const Lease& l) const { return l.heard ? terms_.loss : terms_.fence; }
  const std::shared_ptr<Clock> clock_;
  const LeaseTerms terms_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Lease> leases_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::scheduler
