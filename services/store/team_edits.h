#pragma once
// What both team stores do to a team's message: members and quotas kept sorted and unique, so
// that both implementations return the same team for the same edits.

#include <string_view>

#include "absl/status/status.h"
#include "tessera/v1/teams.pb.h"

namespace tessera::store {

// Inserts the user in sorted order (nothing when already there).
void AddTeamMember(v1::Team& team, std::string_view user);
// NOT_FOUND when the user is not a member.
absl::Status RemoveTeamMember(v1::Team& team, std::string_view user);
// Sets or removes the quota of (cluster, gpu_type), keeping quotas sorted; removing one that is
// not there is NOT_FOUND.
absl::Status EditTeamQuota(v1::Team& team, const v1::TeamQuota& quota, bool remove);

}  // namespace tessera::store
