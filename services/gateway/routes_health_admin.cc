// /api/v1/health/... (HealthService) and /api/v1/whoami, /api/v1/admin/... (AdminService: API
// keys, join tokens, the audit log).
#include <string>

#include "services/gateway/route_helpers.h"
#include "services/gateway/routes.h"

namespace tessera::gateway {

void AddHealthRoutes(RouteTable& t, std::shared_ptr<Upstream> up) {
  using Stub = v1::HealthService::Stub;
  t.Add({.method = "POST",
         .path = "/api/v1/health/sweeps",
         .operation_id = "startSweep",
         .tag = "health",
         .summary = "Start a canary sweep (body: node_names, empty for every ready node).",
         .params = {IdempotencyKeyHeader()},
         .request_body = v1::StartSweepRequest::descriptor(),
         .response = v1::StartSweepResponse::descriptor(),
         .rpcs = {"tessera.v1.HealthService/StartSweep"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::StartSweepRequest req;
           if (absl::Status st = BindRequest(r, true, {}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->health(), &Stub::StartSweep, req);
         }});

  t.Add({.method = "GET",
         .path = "/api/v1/health/sweeps",
         .operation_id = "listSweeps",
         .tag = "health",
         .summary = "Recent sweeps, newest first.",
         .params = {LimitParam()},
         .response = v1::ListSweepsResponse::descriptor(),
         .rpcs = {"tessera.v1.HealthService/ListSweeps"},
         .handler = [up](const Request& r) -> HandlerResult {
           QueryReader q(r);
           v1::ListSweepsRequest req;
           req.set_limit(q.Count("limit"));
           if (!q.status().ok()) return ErrorResponse(q.status());
           return CallUnary(*up, r, up->health(), &Stub::ListSweeps, req);
         }});

  t.Add({.method = "GET",
         .path = "/api/v1/health/sweeps/{id}",
         .operation_id = "getSweep",
         .tag = "health",
         .summary = "A sweep and its results.",
         .params = {PathParam("id", ParamType::kId, "The sweep's id.")},
         .response = v1::GetSweepResponse::descriptor(),
         .rpcs = {"tessera.v1.HealthService/GetSweep"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::GetSweepRequest req;
           if (absl::Status st = BindRequest(r, false, {{"id", "id"}}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->health(), &Stub::GetSweep, req);
         }});

  t.Add({.method = "GET",
         .path = "/api/v1/health/results",
         .operation_id = "listHealthResults",
         .tag = "health",
         .summary = "Health check results, newest first.",
         .params = {RepeatedQueryParam("node", ParamType::kNodeName, "Only these nodes."),
                    QueryParam("sweep_id", ParamType::kString, "Only this sweep's results."),
                    LimitParam()},
         .response = v1::ListHealthResultsResponse::descriptor(),
         .rpcs = {"tessera.v1.HealthService/ListHealthResults"},
         .handler = [up](const Request& r) -> HandlerResult {
           QueryReader q(r);
           v1::ListHealthResultsRequest req;
           for (const std::string& n : q.Strings("node")) req.add_node_names(n);
           req.set_sweep_id(q.String("sweep_id"));
           req.set_limit(q.Count("limit"));
           if (!q.status().ok()) return ErrorResponse(q.status());
           return CallUnary(*up, r, up->health(), &Stub::ListHealthResults, req);
         }});
}

void AddAdminRoutes(RouteTable& t, std::shared_ptr<Upstream> up) {
  using Stub = v1::AdminService::Stub;
  t.Add({.method = "GET",
         .path = "/api/v1/whoami",
         .operation_id = "whoAmI",
         .tag = "admin",
         .summary = "The user and role of the API key the request carries.",
         .response = v1::WhoAmIResponse::descriptor(),
         .rpcs = {"tessera.v1.AdminService/WhoAmI"},
         .handler = [up](const Request& r) -> HandlerResult {
           return CallUnary(*up, r, up->admin(), &Stub::WhoAmI, v1::WhoAmIRequest());
         }});

  t.Add({.method = "POST",
         .path = "/api/v1/admin/api-keys",
         .operation_id = "createApiKey",
         .tag = "admin",
         .summary = "Create an API key (the secret is in the response, once).",
         .params = {IdempotencyKeyHeader()},
         .request_body = v1::CreateApiKeyRequest::descriptor(),
         .response = v1::CreateApiKeyResponse::descriptor(),
         .rpcs = {"tessera.v1.AdminService/CreateApiKey"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::CreateApiKeyRequest req;
           if (absl::Status st = BindRequest(r, true, {}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->admin(), &Stub::CreateApiKey, req);
         }});

  t.Add({.method = "GET",
         .path = "/api/v1/admin/api-keys",
         .operation_id = "listApiKeys",
         .tag = "admin",
         .summary = "List API keys.",
         .params = {QueryParam("user", ParamType::kString, "Only this user's keys.")},
         .response = v1::ListApiKeysResponse::descriptor(),
         .rpcs = {"tessera.v1.AdminService/ListApiKeys"},
         .handler = [up](const Request& r) -> HandlerResult {
           QueryReader q(r);
           v1::ListApiKeysRequest req;
           req.set_user(q.String("user"));
           return CallUnary(*up, r, up->admin(), &Stub::ListApiKeys, req);
         }});

  t.Add({.method = "DELETE",
         .path = "/api/v1/admin/api-keys/{id}",
         .operation_id = "revokeApiKey",
         .tag = "admin",
         .summary = "Revoke an API key.",
         .params = {PathParam("id", ParamType::kId, "The key's id."), IdempotencyKeyHeader()},
         .response = v1::RevokeApiKeyResponse::descriptor(),
         .rpcs = {"tessera.v1.AdminService/RevokeApiKey"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::RevokeApiKeyRequest req;
           if (absl::Status st = BindRequest(r, false, {{"id", "id"}}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->admin(), &Stub::RevokeApiKey, req);
         }});

  t.Add({.method = "POST",
         .path = "/api/v1/admin/join-tokens",
         .operation_id = "createJoinToken",
         .tag = "admin",
         .summary = "Create a one-time join token for a new node (body: node, expires_in_seconds; "
                    "the secret is in the response, once).",
         .params = {IdempotencyKeyHeader()},
         .request_body = v1::CreateJoinTokenRequest::descriptor(),
         .response = v1::CreateJoinTokenResponse::descriptor(),
         .rpcs = {"tessera.v1.AdminService/CreateJoinToken"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::CreateJoinTokenRequest req;
           if (absl::Status st = BindRequest(r, true, {}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->admin(), &Stub::CreateJoinToken, req);
         }});

  t.Add({.method = "GET",
         .path = "/api/v1/admin/join-tokens",
         .operation_id = "listJoinTokens",
         .tag = "admin",
         .summary = "Join tokens, newest first (never their secrets).",
         .response = v1::ListJoinTokensResponse::descriptor(),
         .rpcs = {"tessera.v1.AdminService/ListJoinTokens"},
         .handler = [up](const Request& r) -> HandlerResult {
           return CallUnary(*up, r, up->admin(), &Stub::ListJoinTokens,
                            v1::ListJoinTokensRequest());
         }});

  t.Add({.method = "DELETE",
         .path = "/api/v1/admin/join-tokens/{id}",
         .operation_id = "revokeJoinToken",
         .tag = "admin",
         .summary = "Revoke a join token.",
         .params = {PathParam("id", ParamType::kId, "The token's id."), IdempotencyKeyHeader()},
         .response = v1::RevokeJoinTokenResponse::descriptor(),
         .rpcs = {"tessera.v1.AdminService/RevokeJoinToken"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::RevokeJoinTokenRequest req;
           if (absl::Status st = BindRequest(r, false, {{"id", "id"}}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->admin(), &Stub::RevokeJoinToken, req);
         }});

  t.Add(
      {.method = "GET",
       .path = "/api/v1/admin/audit",
       .operation_id = "listAuditRecords",
       .tag = "admin",
       .summary = "What admins and operators did, and refused attempts, newest first.",
       .params = {QueryParam("since", ParamType::kDateTime, "Only records at or after this time."),
                  QueryParam("actor", ParamType::kString, "Only this user's actions."),
                  QueryParam("action", ParamType::kString,
                             "Only this action (CordonNode, or CordonService/CordonNode)."),
                  QueryParam("target", ParamType::kString,
                             "Only records whose target contains this text."),
                  QueryParam("before_id", ParamType::kId64,
                             "Only records older than this id (the last of a page)."),
                  LimitParam()},
       .response = v1::ListAuditRecordsResponse::descriptor(),
       .rpcs = {"tessera.v1.AdminService/ListAuditRecords"},
       .handler = [up](const Request& r) -> HandlerResult {
         QueryReader q(r);
         v1::ListAuditRecordsRequest req;
         if (auto since = q.DateTime("since")) *req.mutable_since() = *since;
         req.set_actor(q.String("actor"));
         req.set_action(q.String("action"));
         req.set_target(q.String("target"));
         req.set_before_id(q.Id64("before_id"));
         req.set_limit(q.Count("limit"));
         if (!q.status().ok()) return ErrorResponse(q.status());
         return CallUnary(*up, r, up->admin(), &Stub::ListAuditRecords, req);
       }});
}

}  // namespace tessera::gateway
