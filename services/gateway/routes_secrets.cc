// /api/v1/secrets: a user's own secrets. The value of a new secret is in the body (base64, as
// protobuf's JSON writes bytes) and is never in a response.
#include "services/gateway/route_helpers.h"
#include "services/gateway/routes.h"

namespace tessera::gateway {

void AddSecretRoutes(RouteTable& t, std::shared_ptr<Upstream> up) {
  using Stub = v1::SecretService::Stub;
  t.Add({.method = "POST",
         .path = "/api/v1/secrets",
         .operation_id = "createSecret",
         .tag = "secrets",
         .summary = "Create a secret your runs get (body: secret {name, type, env_key | "
                    "mount_path | server, username}, value as base64). Its value is never "
                    "shown again.",
         .request_body = v1::CreateSecretRequest::descriptor(),
         .response = v1::CreateSecretResponse::descriptor(),
         .rpcs = {"tessera.v1.SecretService/CreateSecret"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::CreateSecretRequest req;
           if (absl::Status st = BindRequest(r, true, {}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->secrets(), &Stub::CreateSecret, req);
         }});

  t.Add({.method = "GET",
         .path = "/api/v1/secrets",
         .operation_id = "listSecrets",
         .tag = "secrets",
         .summary = "Your secrets: names, types and where runs get them (never their values).",
         .response = v1::ListSecretsResponse::descriptor(),
         .rpcs = {"tessera.v1.SecretService/ListSecrets"},
         .handler = [up](const Request& r) -> HandlerResult {
           return CallUnary(*up, r, up->secrets(), &Stub::ListSecrets, v1::ListSecretsRequest());
         }});

  t.Add({.method = "DELETE",
         .path = "/api/v1/secrets/{name}",
         .operation_id = "deleteSecret",
         .tag = "secrets",
         .summary = "Delete one of your secrets.",
         .params = {PathParam("name", ParamType::kRunName, "The secret's name.")},
         .response = v1::DeleteSecretResponse::descriptor(),
         .rpcs = {"tessera.v1.SecretService/DeleteSecret"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::DeleteSecretRequest req;
           if (absl::Status st = BindRequest(r, false, {{"name", "name"}}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->secrets(), &Stub::DeleteSecret, req);
         }});
}

}  // namespace tessera::gateway
