#include "services/admin/team_handler.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "services/admin/admin_handler.h"
#include "services/admin/usage_report.h"

namespace tessera::admin {
namespace {

absl::Status ValidateShare(double share) {
  if (!std::isfinite(share) || share <= 0 || share > kMaxTeamShare) {
    return absl::InvalidArgumentError(
        absl::StrCat("share: must be a number above 0 and at most ", kMaxTeamShare));
  }
  return absl::OkStatus();
}

// Cluster and GPU type names follow the nodes' own rules: what a node may be called.
absl::Status ValidateQuota(const v1::SetTeamQuotaRequest& req) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("cluster", req.cluster()));
  if (!req.gpu_type().empty())
    TESSERA_RETURN_IF_ERROR(ValidateUserName("gpu_type", req.gpu_type()));
  if (!req.remove() && (req.gpus() < 0 || req.gpus() > kMaxQuotaGpus)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpus: must be between 0 and ", kMaxQuotaGpus, " (got ", req.gpus(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

TeamHandler::TeamHandler(std::shared_ptr<store::TeamStore> teams, std::shared_ptr<Clock> clock,
                         std::shared_ptr<store::UsageStore> usage)
    : teams_(std::move(teams)), clock_(std::move(clock)), usage_(std::move(usage)) {}

absl::Status TeamHandler::CreateTeam(const Who&, const v1::CreateTeamRequest& req,
                                     v1::CreateTeamResponse* resp) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("name", req.name()));
  const double share = req.share() == 0 ? 1.0 : req.share();
  TESSERA_RETURN_IF_ERROR(ValidateShare(share));
  v1::Team team;
  team.set_name(req.name());
  team.set_share(share);
  *team.mutable_created_at() = ToProtoTime(clock_->Now());
  TESSERA_RETURN_IF_ERROR(teams_->CreateTeam(team));
  *resp->mutable_team() = team;
  return absl::OkStatus();
}

absl::Status TeamHandler::DeleteTeam(const Who&, const v1::DeleteTeamRequest& req,
                                     v1::DeleteTeamResponse*) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("name", req.name()));
  return teams_->DeleteTeam(req.name());
}

absl::Status TeamHandler::GetTeam(const Who&, const v1::GetTeamRequest& req,
                                  v1::GetTeamResponse* resp) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("name", req.name()));
  TESSERA_ASSIGN_OR_RETURN(*resp->mutable_team(), teams_->GetTeam(req.name()));
  return absl::OkStatus();
}

absl::Status TeamHandler::ListTeams(const Who&, const v1::ListTeamsRequest&,
                                    v1::ListTeamsResponse* resp) {
  TESSERA_ASSIGN_OR_RETURN(auto teams, teams_->ListTeams());
  for (auto& team : teams) *resp->add_teams() = std::move(team);
  return absl::OkStatus();
}

absl::Status TeamHandler::AddTeamMember(const Who&, const v1::AddTeamMemberRequest& req,
                                        v1::AddTeamMemberResponse* resp) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("team", req.team()));
  TESSERA_RETURN_IF_ERROR(ValidateUserName("user", req.user()));
  TESSERA_ASSIGN_OR_RETURN(*resp->mutable_team(), teams_->AddMember(req.team(), req.user()));
  return absl::OkStatus();
}

absl::Status TeamHandler::RemoveTeamMember(const Who&, const v1::RemoveTeamMemberRequest& req,
                                           v1::RemoveTeamMemberResponse* resp) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("team", req.team()));
  TESSERA_RETURN_IF_ERROR(ValidateUserName("user", req.user()));
  TESSERA_ASSIGN_OR_RETURN(*resp->mutable_team(), teams_->RemoveMember(req.team(), req.user()));
  return absl::OkStatus();
}

absl::Status TeamHandler::SetTeamQuota(const Who&, const v1::SetTeamQuotaRequest& req,
                                       v1::SetTeamQuotaResponse* resp) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("team", req.team()));
  TESSERA_RETURN_IF_ERROR(ValidateQuota(req));
  v1::TeamQuota quota;
  quota.set_cluster(req.cluster());
  quota.set_gpu_type(req.gpu_type());
  quota.set_gpus(req.gpus());
  TESSERA_ASSIGN_OR_RETURN(*resp->mutable_team(),
                           teams_->SetQuota(req.team(), quota, req.remove()));
  return absl::OkStatus();
}

absl::Status TeamHandler::SetTeamShare(const Who&, const v1::SetTeamShareRequest& req,
                                       v1::SetTeamShareResponse* resp) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("team", req.team()));
  TESSERA_RETURN_IF_ERROR(ValidateShare(req.share()));
  TESSERA_ASSIGN_OR_RETURN(*resp->mutable_team(), teams_->SetShare(req.team(), req.share()));
  return absl::OkStatus();
}

absl::Status TeamHandler::GetUsage(const Who& who, const v1::GetUsageRequest& req,
                                   v1::GetUsageResponse* resp) {
  if (usage_ == nullptr) return absl::UnimplementedError("usage is not kept by this server");
  std::string user = req.user();
  if (!who.sees_all_runs() && !who.is_system()) {
    if (!user.empty() && user != who.user) {
      return absl::PermissionDeniedError(
          absl::StrCat("user: you may see only your own usage (", who.user, "), not ", user));
    }
    user = who.user;
  }
  if (!user.empty()) TESSERA_RETURN_IF_ERROR(ValidateUserName("user", user));
  if (!req.team().empty()) TESSERA_RETURN_IF_ERROR(ValidateUserName("team", req.team()));
  const absl::Time now = clock_->Now();
  const absl::Time until = req.has_until() ? FromProtoTime(req.until()) : now;
  const absl::Time since =
      req.has_since() ? FromProtoTime(req.since()) : until - absl::Hours(24 * 7);
  if (since >= until) return absl::InvalidArgumentError("since: must be before until");
  if (until - since > absl::Hours(24 * kMaxUsageDays)) {
    return absl::InvalidArgumentError(
        absl::StrCat("since: at most ", kMaxUsageDays, " days before until"));
  }
  TESSERA_ASSIGN_OR_RETURN(auto attempts, usage_->ListAttemptUsage(since, until));
  std::erase_if(attempts, [&](const store::AttemptUsage& a) {
    return (!user.empty() && a.user != user) || (!req.team().empty() && a.team != req.team());
  });
  for (auto& row : SummarizeUsage(attempts, since, until)) *resp->add_rows() = std::move(row);
  return absl::OkStatus();
}

}  // namespace tessera::admin
