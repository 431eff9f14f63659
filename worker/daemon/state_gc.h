// Disk hygiene for the worker's state folder: an attempt folder (its working folder, spooled
// logs, parameters) is removed once its ranks are gone, every spool file has been shipped
// completely, and nothing in it has changed for the retention period. A folder with output not
// yet acknowledged by the log service is never removed, however old.
#pragma once

#include <set>
#include <string>
#include <utility>

#include "absl/time/time.h"

namespace tessera::worker {

// `active`: (run id, resumption) of attempts the worker still tracks. Returns how many attempt
// folders were removed. `now` is compared with the files' modification times.
int CollectFinishedAttempts(const std::string& state_dir,
                            const std::set<std::pair<std::string, int>>& active,
                            absl::Duration retention, absl::Time now);

}  // namespace tessera::worker
