#pragma once
// Leader election for a role (the scheduler, the health API) among instances of one service:
// the holder of the store's lock on the role leads; the others are hot standbys that take over
// when the holder's session ends. Each hold is a term with an epoch, and writes on the leader's
// behalf carry it (Fence) so that the store refuses them once a newer term has begun.
//
// A holder steps down on its own when it misses its deadline: a hold not confirmed for
// `term_timeout` on the monotonic clock is no longer leadership, whatever the store would say,
// so a leader that was frozen (SIGSTOP, a long pause, a hung disk) or cut off from the database
// stops acting before a standby may take over (the store closes a session idle for longer than
// its session timeout, which is longer than `term_timeout`).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "services/store/leader_lock_store.h"
#include "services/store/write_fence.h"

namespace tessera {

struct LeaderElectionOptions {
  // Shorter than the lock store's session timeout (store::LeaderSessionOptions, 5 s), and longer
  // than the beat on which the holder confirms.
  absl::Duration term_timeout = absl::Seconds(4);
  // The lock store's session timeout: a hold unconfirmed for this long may have been taken over
  // (the store ends a session idle this long), so its workers' streams may be another
  // instance's by then.
  absl::Duration session_timeout = absl::Seconds(5);
};

class LeaderElection {
 public:
  // `instance` names this contender and must be unique among them (host:pid). Null `locks`:
  // this instance always leads and its writes are not fenced (one instance, nothing to fence).
  // `monotonic` measures the deadline (MonotonicClock in production).
  LeaderElection(std::shared_ptr<store::LeaderLockStore> locks, std::string role,
                 std::string instance, std::shared_ptr<Clock> monotonic,
                 LeaderElectionOptions options = {});
  ~LeaderElection();  // gives the role up, so that a standby takes over at once
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Asks the store: takes the role when it is free, confirms a hold held before. Whether this
  // instance leads now. Called on one thread's beat (a runner's), at least once per
  // term_timeout while leading.
  bool Lead();
  // Whether this instance leads now: it holds the role and confirmed it within term_timeout.
  // Any thread.
  bool IsLeader() const;
  // Whether this instance keeps the workers' streams it has: while it leads; after its beat
  // stepped down for want of a confirmation (the database is away, or it was frozen) until it
  // learns that another instance holds the role; and while its beat is late (held up by the
  // scheduling cycle) until no other instance can have taken over, one session timeout after
  // its last confirmation. Nothing is written or commanded once it does not lead (Fence
  // refuses); heartbeats are answered, so an outage of the database fences no node. (The
  // price: an instance cut off from the database alone keeps its workers, and its successor
  // declares them lost after a lease.) A beat held up longer than the session timeout lets the
  // workers go: it cannot learn of a successor, who would declare them lost.
  bool KeepsWorkers() const;
  // The epoch of the term this instance leads in, 0 when it does not lead (or is unfenced).
  int64_t epoch() const;
  // The fence for a write on the leader's behalf: nullopt when unfenced (no lock store);
  // UNAVAILABLE when this instance does not lead now (try again: it may confirm its term, or
  // another instance leads).
  absl::StatusOr<std::optional<store::WriteFence>> Fence() const;

  const std::string& role() const { return role_; }

 private:
  // Stops leading at once and gives the role up.
  void StepDown(std::string_view why) ABSL_LOCKS_EXCLUDED(mu_);
  bool IsLeaderLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<store::LeaderLockStore> locks_;
  const std::string role_;
  const std::string instance_;
  const std::shared_ptr<Clock> monotonic_;
  const LeaderElectionOptions options_;
  mutable absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // Held a term, lost its confirmation, and has not yet seen another holder.
  bool caretaker_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time confirmed_at_ ABSL_GUARDED_BY(mu_);  // on the monotonic clock
};

}  // namespace tessera
