#include "services/gateway/openapi.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "services/common/auth/rpc_roles.h"
#include "services/gateway/params.h"
#include "services/gateway/proto_schema.h"

namespace tessera::gateway {
namespace {

using nlohmann::json;

json ParamSchema(const ParamSpec& p) {
  json s;
  switch (p.type) {
    case ParamType::kString:
      s = {{"type", "string"}, {"maxLength", 1024}};
      break;
    case ParamType::kCount:
      s = {{"type", "integer"}, {"format", "int32"}, {"minimum", 0}};
      break;
    case ParamType::kId64:
      s = {{"type", "integer"}, {"format", "int64"}, {"minimum", 0}};
      break;
    case ParamType::kBoolean:
      s = {{"type", "boolean"}};
      break;
    case ParamType::kDateTime:
      s = {{"type", "string"}, {"format", "date-time"}};
      break;
    case ParamType::kEnum:
      s = {{"type", "string"}, {"enum", EnumValues(p)}};
      break;
    case ParamType::kRunName:
    case ParamType::kNodeName:
    case ParamType::kId:
      s = {{"type", "string"}, {"pattern", PatternOf(p.type)}};
      break;
    case ParamType::kToken:
      s = {{"type", "string"}, {"minLength", 1}, {"maxLength", 256}};
      break;
    case ParamType::kKeyValue:
      s = {{"type", "string"}, {"pattern", "^[^=]+=.*$"}, {"maxLength", 1024}};
      break;
  }
  if (p.repeated) return json{{"type", "array"}, {"items", s}};
  return s;
}

json Parameter(const ParamSpec& p) {
  json out = {{"name", p.name},
              {"required", p.required || p.in == ParamIn::kPath},
              {"description", p.description},
              {"schema", ParamSchema(p)}};
  switch (p.in) {
    case ParamIn::kPath:
      out["in"] = "path";
      break;
    case ParamIn::kQuery:
      out["in"] = "query";
      // Repeated parameters repeat the name: ?status=RUNNING&status=QUEUED.
      if (p.repeated) {
        out["style"] = "form";
        out["explode"] = true;
      }
      break;
    case ParamIn::kHeader:
      out["in"] = "header";
      break;
  }
  return out;
}

json JsonContent(json schema) {
  return json{{"application/json", {{"schema", std::move(schema)}}}};
}

json EventStreamContent(const Route& r, json& schemas) {
  json data = r.stream_schema               ? r.stream_schema(schemas)
              : r.stream_message != nullptr ? SchemaRef(r.stream_message, schemas)
                                            : json::object();
  return json{{"text/event-stream",
               {{"schema",
                 {{"type", "string"},
                  {"description", "Server-Sent Events: \"event: " + r.event_name +
                                      "\", \"data:\" one JSON object per event; an \"error\" "
                                      "event carries an Error if the stream fails."}}},
                {"x-event-name", r.event_name},
                {"x-event-data", data}}}};
}

json ResponseSchema(const Route& r, json& schemas) {
  if (r.response_schema) return r.response_schema(schemas);
  if (r.response != nullptr) return SchemaRef(r.response, schemas);
  return json{{"type", "object"}};
}

json Operation(const Route& r, json& schemas) {
  json op = {{"operationId", r.operation_id}, {"summary", r.summary}, {"tags", {r.tag}}};
  json params = json::array();
  for (const ParamSpec& p : r.params) params.push_back(Parameter(p));
  if (!params.empty()) op["parameters"] = params;
  if (r.request_body != nullptr) {
    op["requestBody"] = {{"required", false},
                         {"content", JsonContent(SchemaRef(r.request_body, schemas))}};
    if (r.yaml_body) {
      op["requestBody"]["content"]["application/yaml"] = {
          {"schema",
           {{"type", "string"},
            {"description",
             "A run YAML as mcli run -f reads it (also sent as text/yaml or "
             "application/x-yaml, or with any other type when the body is not JSON)"}}}};
    }
  }
  json ok = {{"description", "OK"}};
  switch (r.response_kind) {
    case ResponseKind::kJson:
      ok["content"] = JsonContent(ResponseSchema(r, schemas));
      break;
    case ResponseKind::kEventStream:
      ok["content"] = EventStreamContent(r, schemas);
      break;
    case ResponseKind::kJsonOrEventStream: {
      json content = EventStreamContent(r, schemas);
      content["application/json"] = {{"schema", ResponseSchema(r, schemas)}};
      ok["content"] = content;
      break;
    }
  }
  op["responses"] = {{"200", ok},
                     {"default",
                      {{"description", "An error, with the HTTP status of its gRPC code"},
                       {"content", JsonContent({{"$ref", "#/components/schemas/Error"}})}}}};
  if (!r.requires_auth) op["security"] = json::array();
  // Who may call it: the roles of the RPCs it calls, from the one role table.
  if (!r.rpcs.empty()) {
    json roles = json::array();
    for (const std::string& rpc : r.rpcs) {
      if (const auth::RpcRule* rule = auth::FindRpcRule(rpc)) {
        for (v1::Role role : rule->roles) {
          const std::string name = auth::RoleName(role);
          if (std::find(roles.begin(), roles.end(), name) == roles.end()) roles.push_back(name);
        }
      }
    }
    op["x-tessera-rpcs"] = r.rpcs;
    op["x-tessera-roles"] = roles;
  }
  return op;
}

}  // namespace

json BuildOpenApi(const RouteTable& table) {
  json schemas = json::object();
  schemas["Error"] = {
      {"type", "object"},
      {"required", json::array({"error"})},
      {"properties",
       {{"error",
         {{"type", "object"},
          {"required", json::array({"code", "message"})},
          {"properties",
           {{"code",
             {{"type", "string"}, {"description", "A gRPC code name, e.g. INVALID_ARGUMENT"}}},
            {"message", {{"type", "string"}}}}}}}}}};

  json paths = json::object();
  std::set<std::string> tags;
  for (const Route& r : table.routes()) {
    paths[r.path][absl::AsciiStrToLower(r.method)] = Operation(r, schemas);
    tags.insert(r.tag);
  }
  json tag_list = json::array();
  for (const std::string& t : tags) tag_list.push_back({{"name", t}});

  return json{
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "Tessera REST API"},
        {"version", "v1"},
        {"description",
         "JSON over HTTP for the Tessera control plane; each route calls one gRPC method. "
         "Authenticate with \"Authorization: Bearer <API key>\". Errors are "
         "{\"error\": {\"code\", \"message\"}}."}}},
      {"tags", tag_list},
      {"paths", paths},
      {"components",
       {{"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}},
        {"schemas", schemas}}},
      {"security", json::array({{{"bearer", json::array()}}})},
  };
}

std::string RenderOpenApi(const RouteTable& table) { return BuildOpenApi(table).dump(); }

}  // namespace tessera::gateway
