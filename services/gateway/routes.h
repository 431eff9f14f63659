#pragma once
// The REST API: every route of the gateway, grouped by the service it translates to.

#include <memory>

#include "services/gateway/route_table.h"
#include "services/gateway/upstream.h"

namespace tessera::gateway {

// The whole table: runs, logs, nodes, health, admin, then /api/v1/openapi.json (rendered from the
// table itself) and /healthz. Check status() of the result.
RouteTable BuildRouteTable(std::shared_ptr<Upstream> upstream);

// /api/v1/runs... (RunService).
void AddRunRoutes(RouteTable& table, std::shared_ptr<Upstream> upstream);
// /api/v1/runs/{name}/logs (LogService).
void AddLogRoutes(RouteTable& table, std::shared_ptr<Upstream> upstream);
// /api/v1/nodes..., /api/v1/events, /api/v1/queue (SchedulerService, CordonService).
void AddNodeRoutes(RouteTable& table, std::shared_ptr<Upstream> upstream);
// /api/v1/health/... (HealthService).
void AddHealthRoutes(RouteTable& table, std::shared_ptr<Upstream> upstream);
// /api/v1/whoami, /api/v1/admin/... (AdminService).
void AddAdminRoutes(RouteTable& table, std::shared_ptr<Upstream> upstream);
// /api/v1/secrets: the caller's own secrets (values go in, never out).
void AddSecretRoutes(RouteTable& table, std::shared_ptr<Upstream> upstream);
void AddTeamRoutes(RouteTable& table, std::shared_ptr<Upstream> upstream);

// Parameters several routes share.
ParamSpec IdempotencyKeyHeader();
ParamSpec LimitParam();

}  // namespace tessera::gateway
