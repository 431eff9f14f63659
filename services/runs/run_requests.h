#pragma once
// What a person's requests to find or change runs may ask, checked before anything is read, and
// a change applied to a run's scheduling: pure functions, so that the run manager stays its
// calls' order and their transactions.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

// The most runs a filter's own limit may ask for, and the most metadata pairs it may match.
inline constexpr int kMaxListLimit = 10'000;
inline constexpr int kMaxMetadataFilters = 16;

// A run filter (ListRuns, WatchRuns): INVALID_ARGUMENT naming the field it gets wrong.
absl::Status CheckRunFilter(const v1::RunFilter& filter);

// The spec a submit asks for: `spec`, or `spec_text` read as mcli reads a run YAML (a JSON
// object by the JSON reader), its notes appended to `notes`. INVALID_ARGUMENT naming the field
// ("spec_text: line 4, column 9: compute.gpus: ...") when it does not parse, and when the request
// gives both or neither.
absl::StatusOr<v1::RunSpec> SpecOfSubmit(const v1::SubmitRunRequest& request,
                                         std::vector<std::string>* notes);

// UpdateRun's fields: INVALID_ARGUMENT naming the field, or when it changes nothing.
absl::Status CheckUpdateRequest(const v1::UpdateRunRequest& request);

// Applies the update to the run's scheduling; returns what changed, as its event says it
// ("priority=PRIORITY_HIGH", "watchdog on, max_retries=10").
std::vector<std::string> ApplyUpdate(const v1::UpdateRunRequest& request,
                                     v1::SchedulingSpec& scheduling);

}  // namespace tessera::runs
