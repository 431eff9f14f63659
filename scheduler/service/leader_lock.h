#pragma once
// The scheduler's leader lock: the store's lock on the scheduler role, asked once per cycle. The
// holder places runs; the others are hot standbys that take over when the holder's session ends
// (its process died or its connection to the database broke).

#include <memory>
#include <string>

#include "services/store/leader_lock_store.h"

namespace tessera::scheduler {

class LeaderLock {
 public:
  // `instance` names this scheduler among its peers and must be unique among them (host:pid).
  // Null `locks`: this instance always leads (a single instance without a database).
  LeaderLock(std::shared_ptr<store::LeaderLockStore> locks, std::string instance);
  ~LeaderLock();  // gives the leadership up
  LeaderLock(const LeaderLock&) = delete;
  LeaderLock& operator=(const LeaderLock&) = delete;

  // Whether this instance leads now: takes the lock when free, and checks that a lock held
  // before is still held. Not thread-safe: one caller (the runner's thread) asks.
  bool Lead();

 private:
  std::shared_ptr<store::LeaderLockStore> locks_;
  const std::string instance_;
  bool held_ = false;
};

}  // namespace tessera::scheduler
