#pragma once
// Paging of ListRuns: a page token names the last run of the page before (its creation time and
// id, the list's order), so that the next page starts after it however many runs were created
// or deleted meanwhile (keyset paging: each page is one indexed range read, not an OFFSET).

#include <string>

#include "absl/status/status.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

// The most runs one ListRuns reply holds (also the page size when the request gives none).
inline constexpr int kMaxRunsPage = 1000;

// The token of the page that follows `last`.
std::string RunPageToken(const v1::Run& last);
// Narrows `filter` to the runs after the token's; INVALID_ARGUMENT for a token this server did
// not issue.
absl::Status ApplyRunPageToken(const std::string& token, v1::RunFilter* filter);

}  // namespace tessera::runs
