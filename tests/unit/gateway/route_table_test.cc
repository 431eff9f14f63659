// Route matching and the table's own checks.
#include <catch2/catch.hpp>
#include <set>

#include "services/gateway/routes.h"

namespace tessera::gateway {
namespace route_table_test {

Handler Noop() {
  return [](const Request&) -> HandlerResult { return Response{}; };
}

RouteTable RealTable() {
  // The channel connects lazily: nothing is called here.
  auto upstream = std::make_shared<Upstream>(
      grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()),
      std::chrono::seconds(1));
  RouteTable t = BuildRouteTable(upstream);
  INFO(t.status().ToString());
  REQUIRE(t.status().ok());
  return t;
}

TEST_CASE("literal segments win over parameters", "[gateway][routes]") {
  const RouteTable t = RealTable();
  auto m = t.Find("GET", "/api/v1/runs/watch");
  REQUIRE(m.route != nullptr);
  CHECK(m.route->operation_id == "watchRuns");
  m = t.Find("GET", "/api/v1/runs/train-1");
  REQUIRE(m.route != nullptr);
  CHECK(m.route->operation_id == "getRun");
  CHECK(m.path_params.at("name") == "train-1");
  // No DELETE on the literal route: the parameter route answers, for the run named "watch".
  m = t.Find("DELETE", "/api/v1/runs/watch");
  REQUIRE(m.route != nullptr);
  CHECK(m.route->operation_id == "deleteRun");
  CHECK(m.path_params.at("name") == "watch");
}

TEST_CASE("unknown paths and methods", "[gateway][routes]") {
  const RouteTable t = RealTable();
  for (const char* path :
       {"/api/v1/runs/", "/api/v1//runs", "/nope", "", "api/v1/runs", "/api/v1/runs/a/b/c"}) {
    INFO(path);
    const auto m = t.Find("GET", path);
    CHECK(m.route == nullptr);
    CHECK(m.allowed.empty());
  }
  const auto m = t.Find("PUT", "/api/v1/runs/x");
  CHECK(m.route == nullptr);
  CHECK(m.allowed == std::vector<std::string>{"DELETE", "GET", "PATCH"});
}

TEST_CASE("every route has a unique operation id, a summary and a tag", "[gateway][routes]") {
  const RouteTable t = RealTable();
  std::set<std::string> ids;
  for (const Route& r : t.routes()) {
    INFO(r.method << " " << r.path);
    CHECK(ids.insert(r.operation_id).second);
    CHECK(!r.summary.empty());
    CHECK(!r.tag.empty());
    if (r.response_kind != ResponseKind::kJson) CHECK(r.stream_message != nullptr);
    if (r.response_kind != ResponseKind::kEventStream && r.requires_auth) {
      CHECK((r.response != nullptr || r.response_schema));
    }
  }
}

TEST_CASE("the table refuses malformed routes", "[gateway][routes]") {
  auto add = [](Route r) {
    RouteTable t;
    t.Add(Route{.method = "GET",
                .path = "/a/{x}",
                .operation_id = "first",
                .params = {PathParam("x", ParamType::kId, "")},
                .handler = Noop()});
    REQUIRE(t.status().ok());
    t.Add(std::move(r));
    return t;
  };
  CHECK_FALSE(add(Route{.method = "GET", .path = "/b/{y}", .operation_id = "u", .handler = Noop()})
                  .status()
                  .ok());  // {y} undeclared
  CHECK_FALSE(add(Route{.method = "GET",
                        .path = "/b",
                        .operation_id = "u",
                        .params = {PathParam("y", ParamType::kId, "")},
                        .handler = Noop()})
                  .status()
                  .ok());  // y declared, not in the path
  CHECK_FALSE(add(Route{.method = "GET",
                        .path = "/a/{x}",
                        .operation_id = "dup",
                        .params = {PathParam("x", ParamType::kId, "")},
                        .handler = Noop()})
                  .status()
                  .ok());  // same method and path
  CHECK_FALSE(add(Route{.method = "POST", .path = "/c", .operation_id = "first", .handler = Noop()})
                  .status()
                  .ok());  // same operation id
  CHECK_FALSE(add(Route{.method = "GET", .path = "/c/{", .operation_id = "u", .handler = Noop()})
                  .status()
                  .ok());
  CHECK_FALSE(add(Route{.method = "GET", .path = "/c//d", .operation_id = "u", .handler = Noop()})
                  .status()
                  .ok());
  CHECK_FALSE(add(Route{.method = "GET", .path = "/c", .operation_id = "u"}).status().ok());
  CHECK(add(Route{.method = "POST",
                  .path = "/a/{x}",
                  .operation_id = "u",
                  .params = {PathParam("x", ParamType::kId, "")},
                  .handler = Noop()})
            .status()
            .ok());
}

}  // namespace route_table_test
}  // namespace tessera::gateway
