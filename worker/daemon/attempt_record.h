// What a worker writes to its state folder about each attempt it starts, so that the next
// incarnation (after a crash, kill -9 or upgrade) can find the rank processes and stop them:
// no orphan rank survives its worker. A process is recognised by its pid AND its start time,
// so a recycled pid is never signalled.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::worker {

struct RankRecord {
  int rank = 0;
  pid_t pid = 0;  // also the process group id
  unsigned long long start_ticks = 0;
};

struct AttemptRecord {
  std::string run_id;
  std::string run_name;
  int resumption_index = 0;
  int node_rank = 0;
  std::string dir;  // the attempt's folder (AttemptPaths::dir)
  std::vector<RankRecord> ranks;
};

// The start time of `pid` in clock ticks since boot (field 22 of /proc/PID/stat); nullopt when
// the process does not exist.
std::optional<unsigned long long> ProcessStartTicks(pid_t pid);
// Live (not zombie) members of process group `pgid` that started no earlier than `since` clock
// ticks after boot (older ones belong to an unrelated group that happens to have the same id).
std::vector<pid_t> LiveGroupMembers(pid_t pgid, unsigned long long since = 0);
// True while `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);

// What the live members of process group `pgid` are doing, from /proc.
struct GroupSample {
  int members = 0;
  // Their CPU time so far (user and system, clock ticks): it stays put while none of them runs.
  unsigned long long cpu_ticks = 0;
  // Some member is stopped (T: a signal, a tracer) or in uninterruptible sleep (D: stuck in the
  // kernel, a hung disk or driver): it cannot be making progress of its own.
  bool stuck_member = false;
};
// Each of `pgids`, from one pass over /proc (a group with no live member is left out).
std::map<pid_t, GroupSample> SampleGroups(const std::set<pid_t>& pgids);

class AttemptRecords {
 public:
  explicit AttemptRecords(std::string state_dir);

  // Written atomically (temporary file, fsync, rename).
  absl::Status Save(const AttemptRecord& record);
  absl::Status Remove(const std::string& run_id, int resumption_index);
  // Every record; unreadable files are reported in the status of the entry and skipped.
  std::vector<AttemptRecord> LoadAll(std::vector<std::string>* problems);

 private:
  std::string PathOf(const std::string& run_id, int resumption_index) const;
  std::string dir_;
};

// The zombies whose parent is this process: its own children that ended and, as a child
// subreaper, descendants of ranks whose parents exited. See owned_children.h for who may reap.
std::vector<pid_t> ZombieChildren();

// Kills (SIGKILL to the group) every rank of `record` that is still the same process, and waits
// up to `timeout` for them to be gone. Returns the ranks that were still running.
std::vector<int> KillRecordedRanks(const AttemptRecord& record);

}  // namespace tessera::worker
