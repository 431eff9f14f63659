#pragma once
// Teams (teams.proto): their members, quotas and fair-share weights. A user belongs to at most
// one team. Names are checked by the handler; the store keeps what it is given.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/v1/teams.pb.h"

namespace tessera::store {

class TeamStore {
 public:
  virtual ~TeamStore() = default;
  // ALREADY_EXISTS when a team has the name. The team's members and quotas are ignored.
  virtual absl::Status CreateTeam(const v1::Team& team) = 0;
  // NOT_FOUND when absent; its members belong to no team afterwards.
  virtual absl::Status DeleteTeam(std::string_view name) = 0;
  // NOT_FOUND when absent.
  virtual absl::StatusOr<v1::Team> GetTeam(std::string_view name) = 0;
  // Every team, by name, with members (sorted) and quotas (by cluster, then GPU type).
  virtual absl::StatusOr<std::vector<v1::Team>> ListTeams() = 0;
  // NOT_FOUND for an unknown team; FAILED_PRECONDITION when the user belongs to another team
  // (adding a member twice is OK).
  virtual absl::StatusOr<v1::Team> AddMember(std::string_view team, std::string_view user) = 0;
  // NOT_FOUND for an unknown team or a user who is not its member.
  virtual absl::StatusOr<v1::Team> RemoveMember(std::string_view team, std::string_view user) = 0;
  // Sets the quota for (cluster, gpu_type); with `remove`, removes it (NOT_FOUND when there is
  // none). NOT_FOUND for an unknown team.
  virtual absl::StatusOr<v1::Team> SetQuota(std::string_view team, const v1::TeamQuota& quota,
                                            bool remove) = 0;
  // NOT_FOUND for an unknown team.
  virtual absl::StatusOr<v1::Team> SetShare(std::string_view team, double share) = 0;
  // The user's team, or "" when none.
  virtual absl::StatusOr<std::string> TeamOfUser(std::string_view user) = 0;
};

}  // namespace tessera::store
