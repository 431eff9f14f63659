// The OpenAPI document lists exactly the route table, and every route it documents answers.
#include "services/gateway/openapi.h"

#include <functional>
#include <set>

#include "services/common/auth/rpc_roles.h"
#include "tests/unit/gateway/gateway_fixture.h"

namespace tessera::gateway::testing {
namespace openapi_test {

using nlohmann::json;

json FetchDocument(GatewayFixture& f) {
  const HttpResult r = f.Send("GET", "/api/v1/openapi.json", "", "");
  REQUIRE(r.status == 200);
  return r.Json();
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A value that fits a path parameter's schema.
std::string SampleFor(const json& param) {
  const std::string pattern = param["schema"].value("pattern", "");
  if (pattern == "^[a-z0-9-]{1,63}$") return "train-1";
  if (pattern == "^[A-Za-z0-9._-]{1,253}$") return "node-1.rack_2";
  return "id-1:x";
}

TEST_CASE("the OpenAPI document lists exactly the routes of the route table",
          "[gateway][openapi]") {
  GatewayFixture f;
  json doc = FetchDocument(f);
  CHECK(doc["openapi"] == "3.0.3");

  std::set<std::pair<std::string, std::string>> documented, routed;
  for (const auto& [path, ops] : doc["paths"].items()) {
    for (const auto& [method, op] : ops.items()) documented.insert({path, Upper(method)});
  }
  for (const Route& r : f.gateway().routes().routes()) routed.insert({r.path, r.method});
  CHECK(documented == routed);
  CHECK(routed.size() == 46);

  // Operation ids are unique, and each operation documents its route's parameters.
  std::set<std::string> ids;
  for (const Route& r : f.gateway().routes().routes()) {
    const json& op = doc.at("paths").at(r.path).at(Lower(r.method));
    INFO(r.method << " " << r.path);
    CHECK(op["operationId"] == r.operation_id);
    CHECK(ids.insert(r.operation_id).second);
    std::set<std::pair<std::string, std::string>> doc_params, route_params;
    for (const json& p : op.value("parameters", json::array())) {
      doc_params.insert({p["name"].get<std::string>(), p["in"].get<std::string>()});
      if (p["in"] == "path") CHECK(p["required"] == true);
    }
    for (const ParamSpec& p : r.params) {
      route_params.insert({p.name, p.in == ParamIn::kPath    ? "path"
                                   : p.in == ParamIn::kQuery ? "query"
                                                             : "header"});
    }
    CHECK(doc_params == route_params);
    CHECK(op.contains("requestBody") == (r.request_body != nullptr));
    CHECK(op.contains("security") != r.requires_auth);
    // Who may call it: every authenticated route names the RPCs it calls, each with a row in the
    // one role table, and the document shows their roles.
    CHECK(r.rpcs.empty() != r.requires_auth);
    std::set<std::string> roles;
    for (const std::string& rpc : r.rpcs) {
      INFO(rpc);
      const auth::RpcRule* rule = auth::FindRpcRule(rpc);
      REQUIRE(rule != nullptr);
      for (v1::Role role : rule->roles) roles.insert(auth::RoleName(role));
    }
    if (r.requires_auth) {
      std::set<std::string> shown;
      for (const auto& name : op.at("x-tessera-roles")) shown.insert(name.get<std::string>());
      CHECK(shown == roles);
      CHECK_FALSE(shown.empty());
    }
  }
  // For instance: cordoning is for operators, admins and the services; reading the audit log is
  // for admins.
  const auto& cordon = doc["paths"]["/api/v1/nodes/{name}/cordon"]["post"]["x-tessera-roles"];
  CHECK(std::find(cordon.begin(), cordon.end(), "operator") != cordon.end());
  CHECK(std::find(cordon.begin(), cordon.end(), "user") == cordon.end());
  CHECK(doc["paths"]["/api/v1/admin/audit"]["get"]["x-tessera-roles"] == json::array({"admin"}));
}

TEST_CASE("the document's schemas come from the protobuf messages", "[gateway][openapi]") {
  GatewayFixture f;
  json doc = FetchDocument(f);
  json& schemas = doc["components"]["schemas"];
  CHECK(doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer");
  CHECK(doc["security"][0].contains("bearer"));

  json& submit = doc["paths"]["/api/v1/runs"]["post"];
  CHECK(submit["requestBody"]["content"]["application/json"]["schema"]["$ref"] ==
        "#/components/schemas/SubmitRunRequest");
  CHECK(submit["responses"]["200"]["content"]["application/json"]["schema"]["$ref"] ==
        "#/components/schemas/SubmitRunResponse");
  CHECK(submit["responses"]["default"]["content"]["application/json"]["schema"]["$ref"] ==
        "#/components/schemas/Error");

  json& run = schemas["Run"]["properties"];
  CHECK(run["version"]["type"] == "string");  // int64 prints as a string
  CHECK(run["created_at"]["format"] == "date-time");
  CHECK(run["status"]["$ref"] == "#/components/schemas/RunStatus");
  CHECK(run["spec"]["$ref"] == "#/components/schemas/RunSpec");
  CHECK(schemas["RunSpec"]["properties"]["metadata"]["type"] == "object");
  CHECK(schemas["RunSpec"]["properties"]["env_variables"]["type"] == "array");
  const json statuses = schemas["RunStatus"]["enum"];
  CHECK(std::find(statuses.begin(), statuses.end(), "RUN_STATUS_RUNNING") != statuses.end());

  json& watch = doc["paths"]["/api/v1/runs/watch"]["get"]["responses"]["200"]["content"];
  CHECK(watch.contains("text/event-stream"));
  CHECK(watch["text/event-stream"]["x-event-data"]["$ref"] == "#/components/schemas/RunChange");
  json& events = doc["paths"]["/api/v1/events"]["get"]["responses"]["200"]["content"];
  CHECK(events.contains("text/event-stream"));
  CHECK(events.contains("application/json"));

  // The status filter is a repeated enum that takes both spellings.
  bool found = false;
  for (const json& p : doc["paths"]["/api/v1/runs"]["get"]["parameters"]) {
    if (p["name"] != "status") continue;
    found = true;
    CHECK(p["schema"]["type"] == "array");
    const json values = p["schema"]["items"]["enum"];
    CHECK(std::find(values.begin(), values.end(), "RUNNING") != values.end());
    CHECK(std::find(values.begin(), values.end(), "RUN_STATUS_RUNNING") != values.end());
  }
  CHECK(found);

  // Every reference resolves.
  std::function<void(const json&)> check_refs = [&](const json& j) {
    if (j.is_object()) {
      for (const auto& [k, v] : j.items()) {
        if (k == "$ref") {
          const std::string ref = v.get<std::string>();
          const std::string prefix = "#/components/schemas/";
          REQUIRE(ref.rfind(prefix, 0) == 0);
          INFO(ref);
          CHECK(schemas.contains(ref.substr(prefix.size())));
        } else {
          check_refs(v);
        }
      }
    } else if (j.is_array()) {
      for (const json& v : j) check_refs(v);
    }
  };
  check_refs(doc);
}

TEST_CASE("every documented path and method answers (no 404, no 405)", "[gateway][openapi]") {
  GatewayFixture f;
  f.stream.events = 1;  // streams end by themselves
  json doc = FetchDocument(f);
  int walked = 0;
  for (const auto& [path, ops] : doc["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      std::string target = path;
      for (const json& p : op.value("parameters", json::array())) {
        if (p["in"] != "path") continue;
        const std::string placeholder = "{" + p["name"].get<std::string>() + "}";
        target.replace(target.find(placeholder), placeholder.size(), SampleFor(p));
      }
      const std::string body = op.contains("requestBody") ? "{}" : "";
      const HttpResult r = f.Send(Upper(method), target, body);
      INFO(Upper(method) << " " << target << " -> " << r.status << " " << r.body);
      CHECK(r.status != 404);
      CHECK(r.status != 405);
      CHECK(r.status == 200);
      ++walked;
    }
  }
  CHECK(walked == static_cast<int>(f.gateway().routes().routes().size()));
}

TEST_CASE("the document is the same one BuildOpenApi renders", "[gateway][openapi]") {
  GatewayFixture f;
  CHECK(FetchDocument(f) == BuildOpenApi(f.gateway().routes()));
}

}  // namespace openapi_test
}  // namespace tessera::gateway::testing
