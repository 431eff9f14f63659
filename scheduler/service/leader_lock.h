#pragma once
// Leader election among scheduler instances: a PostgreSQL session-level advisory lock. The holder
// places runs; the others are hot standbys that take over when the holder's session ends (its
// process died or its connection broke).

#include <memory>
#include <string>

namespace tessera::scheduler {

class LeaderLock {
 public:
  virtual ~LeaderLock() = default;
  // Whether this instance leads now: acquires the lock when free, and checks that a lock held
  // before is still held (its connection is alive).
  virtual bool Lead() = 0;
};

std::unique_ptr<LeaderLock> MakePgLeaderLock(std::string database_url);
// For a single instance without a database (tests).
std::unique_ptr<LeaderLock> MakeAlwaysLeader();

}  // namespace tessera::scheduler
