#pragma once
// Teams (teams.proto): admins create and delete them, set their members, quotas and shares;
// everyone may read them (a run's place in the queue depends on them). The scheduler reads the
// same store for placement (scheduler/service/team_policy.h).

#include <memory>

#include "absl/status/status.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/store/team_store.h"
#include "services/store/usage_store.h"
#include "tessera/v1/teams.pb.h"

namespace tessera::admin {

// A team's share must lie in (0, kMaxTeamShare].
inline constexpr double kMaxTeamShare = 1e6;
// No quota is larger than this many GPUs (a sanity bound, not a capacity).
inline constexpr int kMaxQuotaGpus = 1'000'000;
// A usage report covers at most this many days.
inline constexpr int kMaxUsageDays = 400;

class TeamHandler {
 public:
  // `usage` (null: GetUsage is UNIMPLEMENTED) serves GetUsage.
  TeamHandler(std::shared_ptr<store::TeamStore> teams, std::shared_ptr<Clock> clock,
              std::shared_ptr<store::UsageStore> usage = nullptr);

  using Who = auth::Principal;
  absl::Status CreateTeam(const Who& who, const v1::CreateTeamRequest& req,
                          v1::CreateTeamResponse* resp);
  absl::Status DeleteTeam(const Who& who, const v1::DeleteTeamRequest& req,
                          v1::DeleteTeamResponse* resp);
  absl::Status GetTeam(const Who& who, const v1::GetTeamRequest& req, v1::GetTeamResponse* resp);
  absl::Status ListTeams(const Who& who, const v1::ListTeamsRequest& req,
                         v1::ListTeamsResponse* resp);
  absl::Status AddTeamMember(const Who& who, const v1::AddTeamMemberRequest& req,
                             v1::AddTeamMemberResponse* resp);
  absl::Status RemoveTeamMember(const Who& who, const v1::RemoveTeamMemberRequest& req,
                                v1::RemoveTeamMemberResponse* resp);
  absl::Status SetTeamQuota(const Who& who, const v1::SetTeamQuotaRequest& req,
                            v1::SetTeamQuotaResponse* resp);
  absl::Status SetTeamShare(const Who& who, const v1::SetTeamShareRequest& req,
                            v1::SetTeamShareResponse* resp);
  // Operators and admins see everyone's usage; a user only their own (asking for another
  // user's is PERMISSION_DENIED).
  absl::Status GetUsage(const Who& who, const v1::GetUsageRequest& req, v1::GetUsageResponse* resp);

 private:
  std::shared_ptr<store::TeamStore> teams_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<store::UsageStore> usage_;
};

}  // namespace tessera::admin
