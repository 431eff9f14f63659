#pragma once
// GPU-hours per UTC day, cluster, team, user and outcome, from attempts' real start and end:
// each attempt counts on each day for the part of [since, until) it ran that day.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "services/store/usage_store.h"
#include "tessera/v1/teams.pb.h"

namespace tessera::admin {

// "completed", "failed", "preempted", "node failure", ...; "running" for an attempt not ended.
std::string UsageOutcome(const store::AttemptUsage& usage);

// Rows sorted by day, cluster, team, user, outcome.
std::vector<v1::UsageRow> SummarizeUsage(const std::vector<store::AttemptUsage>& attempts,
                                         absl::Time since, absl::Time until);

}  // namespace tessera::admin
