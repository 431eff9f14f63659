#include "worker/daemon/owned_children.h"

#include <sys/wait.h>
#include <unistd.h>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "worker/daemon/attempt_record.h"

namespace tessera::worker {
namespace {

struct Registry {
  absl::Mutex mu;
  // A count, not a set: an id reaped and reused by a new child before its release is
  // registered twice and must stay registered until both are released.
  absl::flat_hash_map<pid_t, int> owned ABSL_GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static auto* registry = new Registry();  // never destroyed: used until the process ends
  return *registry;
}

}  // namespace

pid_t ForkOwnedChild(const std::function<void()>& in_child) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  const pid_t pid = ::fork();
  if (pid == 0) {
    in_child();
    ::_exit(127);
  }
  if (pid > 0) ++r.owned[pid];
  return pid;
}

void ReleaseOwnedChild(pid_t pid) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.owned.find(pid);
  if (it == r.owned.end()) return;
  if (--it->second == 0) r.owned.erase(it);
}

bool IsOwnedChild(pid_t pid) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  return r.owned.contains(pid);
}

int ReapUnownedZombies() {
  // Most calls find no zombie child at all: asking the kernel (without reaping) is cheap, where
  // the scan below reads every process of the machine.
  siginfo_t info{};
  if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return 0;
  // Listed outside the lock (a /proc scan); a listed pid that became owned since (reaped by its
  // owner and reused by a new fork) is found in the registry below.
  const std::vector<pid_t> zombies = ZombieChildren();
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  int reaped = 0;
  for (const pid_t pid : zombies) {
    if (r.owned.contains(pid)) continue;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) ++reaped;
  }
  return reaped;
}

}  // namespace tessera::worker
