#pragma once
// The OpenAPI 3.0 document of the REST API, generated from the route table: every route's path,
// method, parameters (with their types), request body and response schemas (from the protobuf
// messages), and the bearer security scheme.

#include <nlohmann/json.hpp>
#include <string>

#include "services/gateway/route_table.h"

namespace tessera::gateway {

nlohmann::json BuildOpenApi(const RouteTable& table);
// BuildOpenApi, serialized.
std::string RenderOpenApi(const RouteTable& table);

}  // namespace tessera::gateway
