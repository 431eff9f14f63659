// /api/v1/teams, /api/v1/usage and /api/v1/utilization: teams and their quotas (admins change
// them), GPU usage, and each cluster's GPUs now.
#include "services/gateway/route_helpers.h"
#include "services/gateway/routes.h"

namespace tessera::gateway {

void AddTeamRoutes(RouteTable& t, std::shared_ptr<Upstream> up) {
  using Stub = v1::TeamService::Stub;
  t.Add(
      {.method = "GET",
       .path = "/api/v1/teams",
       .operation_id = "listTeams",
       .tag = "teams",
       .summary = "Every team: members, GPU quotas per cluster (and GPU type), fair-share weight.",
       .response = v1::ListTeamsResponse::descriptor(),
       .rpcs = {"tessera.v1.TeamService/ListTeams"},
       .handler = [up](const Request& r) -> HandlerResult {
         return CallUnary(*up, r, up->teams(), &Stub::ListTeams, v1::ListTeamsRequest());
       }});

  t.Add({.method = "POST",
         .path = "/api/v1/teams",
         .operation_id = "createTeam",
         .tag = "teams",
         .summary = "Create a team (admins; body: name, share).",
         .request_body = v1::CreateTeamRequest::descriptor(),
         .response = v1::CreateTeamResponse::descriptor(),
         .rpcs = {"tessera.v1.TeamService/CreateTeam"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::CreateTeamRequest req;
           if (absl::Status st = BindRequest(r, true, {}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->teams(), &Stub::CreateTeam, req);
         }});

  t.Add({.method = "GET",
         .path = "/api/v1/teams/{name}",
         .operation_id = "getTeam",
         .tag = "teams",
         .summary = "One team.",
         .params = {PathParam("name", ParamType::kRunName, "The team's name.")},
         .response = v1::GetTeamResponse::descriptor(),
         .rpcs = {"tessera.v1.TeamService/GetTeam"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::GetTeamRequest req;
           if (absl::Status st = BindRequest(r, false, {{"name", "name"}}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->teams(), &Stub::GetTeam, req);
         }});

  t.Add({.method = "DELETE",
         .path = "/api/v1/teams/{name}",
         .operation_id = "deleteTeam",
         .tag = "teams",
         .summary = "Delete a team (admins); its users belong to no team afterwards.",
         .params = {PathParam("name", ParamType::kRunName, "The team's name.")},
         .response = v1::DeleteTeamResponse::descriptor(),
         .rpcs = {"tessera.v1.TeamService/DeleteTeam"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::DeleteTeamRequest req;
           if (absl::Status st = BindRequest(r, false, {{"name", "name"}}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->teams(), &Stub::DeleteTeam, req);
         }});

  t.Add({.method = "POST",
         .path = "/api/v1/teams/{team}/members",
         .operation_id = "addTeamMember",
         .tag = "teams",
         .summary = "Make a user a member of the team (admins; body: user).",
         .params = {PathParam("team", ParamType::kRunName, "The team's name.")},
         .request_body = v1::AddTeamMemberRequest::descriptor(),
         .response = v1::AddTeamMemberResponse::descriptor(),
         .rpcs = {"tessera.v1.TeamService/AddTeamMember"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::AddTeamMemberRequest req;
           if (absl::Status st = BindRequest(r, true, {{"team", "team"}}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->teams(), &Stub::AddTeamMember, req);
         }});

  t.Add({.method = "DELETE",
         .path = "/api/v1/teams/{team}/members/{user}",
         .operation_id = "removeTeamMember",
         .tag = "teams",
         .summary = "Remove a user from the team (admins).",
         .params = {PathParam("team", ParamType::kRunName, "The team's name."),
                    PathParam("user", ParamType::kId, "The user.")},
         .response = v1::RemoveTeamMemberResponse::descriptor(),
         .rpcs = {"tessera.v1.TeamService/RemoveTeamMember"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::RemoveTeamMemberRequest req;
           if (absl::Status st = BindRequest(r, false, {{"team", "team"}, {"user", "user"}}, &req);
               !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->teams(), &Stub::RemoveTeamMember, req);
         }});

  t.Add({.method = "PUT",
         .path = "/api/v1/teams/{team}/quotas",
         .operation_id = "setTeamQuota",
         .tag = "teams",
         .summary = "Set or (remove: true) remove the team's GPU quota in a cluster, for one GPU "
                    "type or all (admins; body: cluster, gpu_type, gpus, remove).",
         .params = {PathParam("team", ParamType::kRunName, "The team's name.")},
         .request_body = v1::SetTeamQuotaRequest::descriptor(),
         .response = v1::SetTeamQuotaResponse::descriptor(),
         .rpcs = {"tessera.v1.TeamService/SetTeamQuota"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::SetTeamQuotaRequest req;
           if (absl::Status st = BindRequest(r, true, {{"team", "team"}}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->teams(), &Stub::SetTeamQuota, req);
         }});

  t.Add({.method = "PUT",
         .path = "/api/v1/teams/{team}/share",
         .operation_id = "setTeamShare",
         .tag = "teams",
         .summary = "Set the team's fair-share weight (admins; body: share).",
         .params = {PathParam("team", ParamType::kRunName, "The team's name.")},
         .request_body = v1::SetTeamShareRequest::descriptor(),
         .response = v1::SetTeamShareResponse::descriptor(),
         .rpcs = {"tessera.v1.TeamService/SetTeamShare"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::SetTeamShareRequest req;
           if (absl::Status st = BindRequest(r, true, {{"team", "team"}}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->teams(), &Stub::SetTeamShare, req);
         }});

  t.Add({.method = "GET",
         .path = "/api/v1/usage",
         .operation_id = "getUsage",
         .tag = "teams",
         .summary = "GPU-hours per day, cluster, team, user and outcome, from attempts' real "
                    "start and end (a user sees their own).",
         .params = {QueryParam("since", ParamType::kDateTime,
                               "From this time (default 7 days "
                               "ago)."),
                    QueryParam("until", ParamType::kDateTime, "Up to this time (default now)."),
                    QueryParam("team", ParamType::kRunName, "Only this team's runs."),
                    QueryParam("user", ParamType::kId, "Only this user's runs.")},
         .response = v1::GetUsageResponse::descriptor(),
         .rpcs = {"tessera.v1.TeamService/GetUsage"},
         .handler = [up](const Request& r) -> HandlerResult {
           QueryReader q(r);
           v1::GetUsageRequest req;
           if (auto since = q.DateTime("since")) *req.mutable_since() = *since;
           if (auto until = q.DateTime("until")) *req.mutable_until() = *until;
           req.set_team(q.String("team"));
           req.set_user(q.String("user"));
           if (!q.status().ok()) return ErrorResponse(q.status());
           return CallUnary(*up, r, up->teams(), &Stub::GetUsage, req);
         }});

  t.Add({.method = "GET",
         .path = "/api/v1/utilization",
         .operation_id = "getUtilization",
         .tag = "teams",
         .summary = "Per cluster: GPUs total, in use, free, cordoned and lost; runs running and "
                    "queued.",
         .params = {QueryParam("cluster", ParamType::kString, "Only this cluster.")},
         .response = v1::GetUtilizationResponse::descriptor(),
         .rpcs = {"tessera.v1.SchedulerService/GetUtilization"},
         .handler = [up](const Request& r) -> HandlerResult {
           QueryReader q(r);
           v1::GetUtilizationRequest req;
           req.set_cluster(q.String("cluster"));
           if (!q.status().ok()) return ErrorResponse(q.status());
           return CallUnary(*up, r, up->scheduler(), &v1::SchedulerService::Stub::GetUtilization,
                            req);
         }});
}

}  // namespace tessera::gateway
