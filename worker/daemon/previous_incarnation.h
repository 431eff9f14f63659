// A worker restarted on the state folder of its previous incarnation: the ranks that one left
// are killed (a pid is trusted only with its recorded start time, attempt_record.h) and their
// attempts become LOST, to be reported; whatever the ranks printed is still shipped.
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/attempt_record.h"
#include "worker/daemon/attempt_state.h"

namespace tessera::worker {

struct LostAttempt {
  AttemptState attempt;      // lost, ended at `now`, one exit per recorded rank
  v1::AttemptUpdate update;  // its LOST update
  int killed = 0;            // how many of its ranks were still running
};

// Kills the ranks of every attempt recorded in `records`, removes the records and the
// attempts' secret files, and returns the attempts, each with the update that reports it.
std::vector<LostAttempt> KillPreviousIncarnation(AttemptRecords& records,
                                                 const std::string& state_dir,
                                                 const std::string& node_name, absl::Time now);

}  // namespace tessera::worker
