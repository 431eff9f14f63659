#include "services/gateway/routes.h"

#include <memory>
#include <string>

#include "services/gateway/openapi.h"

namespace tessera::gateway {

ParamSpec IdempotencyKeyHeader() {
  return HeaderParam("Idempotency-Key",
                     "Makes a retried request safe: the same key gets the first answer again. "
                     "Fills the request's idempotency_key.");
}

ParamSpec LimitParam() {
  return QueryParam("limit", ParamType::kCount, "At most this many items (0: the default).");
}

RouteTable BuildRouteTable(std::shared_ptr<Upstream> upstream) {
  RouteTable t;
  AddRunRoutes(t, upstream);
  AddLogRoutes(t, upstream);
  AddNodeRoutes(t, upstream);
  AddHealthRoutes(t, upstream);
  AddAdminRoutes(t, upstream);
  AddSecretRoutes(t, upstream);
  AddTeamRoutes(t, upstream);

  // Rendered once the table is complete; the handler serves the finished text.
  auto document = std::make_shared<std::string>();
  t.Add({.method = "GET",
         .path = "/api/v1/openapi.json",
         .operation_id = "getOpenApi",
         .tag = "meta",
         .summary = "This document.",
         .requires_auth = false,
         .handler = [document](const Request&) -> HandlerResult {
           Response r;
           r.body = *document;
           return r;
         }});
  t.Add({.method = "GET",
         .path = "/healthz",
         .operation_id = "healthz",
         .tag = "meta",
         .summary = "Liveness of the gateway itself (the upstream is not called).",
         .requires_auth = false,
         .handler = [](const Request&) -> HandlerResult {
           Response r;
           r.body = R"({"status":"ok"})";
           return r;
         }});
  *document = RenderOpenApi(t);
  return t;
}

}  // namespace tessera::gateway
