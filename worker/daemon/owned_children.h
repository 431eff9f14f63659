// The children this process forked and will wait for itself (rank leaders). The worker is a
// child subreaper, so it also inherits orphaned descendants of its ranks, which it must reap
// or they stay zombies; but reaping by scanning /proc races with a rank that has just exited:
// whoever calls waitpid first gets its status, and a status reaped by the scan is lost (a run
// that succeeded would be reported as failed). The registry closes that race: a pid is added
// under the registry's lock in the same critical section as the fork, removed once its owner
// reaped it, and the scan reaps only what is not in it, under the same lock.
#pragma once

#include <sys/types.h>

#include <functional>

namespace tessera::worker {

// Forks with the registry locked; the parent's pid (> 0) is registered before anyone can scan.
// The child runs `in_child` (which must not return: it execs or _exits) and must not touch the
// registry. Returns fork's result in the parent.
pid_t ForkOwnedChild(const std::function<void()>& in_child);

// The owner reaped `pid` (or gave it up): from now on a scan may reap a process with that id.
void ReleaseOwnedChild(pid_t pid);

// Reaps every zombie child of this process that no owner waits for. Returns how many.
int ReapUnownedZombies();

// For tests: whether `pid` is registered.
bool IsOwnedChild(pid_t pid);

}  // namespace tessera::worker
