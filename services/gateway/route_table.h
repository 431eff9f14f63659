#pragma once
// The route table: every REST route once, with what the server needs to dispatch and validate a
// request and what the OpenAPI document says about it. Both come from this one list, so the
// document cannot drift from the routes.

#include <google/protobuf/descriptor.h>

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "services/gateway/console_assets.h"
#include "services/gateway/http_types.h"
#include "services/gateway/params.h"

namespace tessera::gateway {

// Called on the connection's thread with a request whose parameters are validated.
using Handler = std::function<HandlerResult(const Request&)>;

// For a shape the gateway prints itself rather than a message's JSON mapping: returns its schema
// for the OpenAPI document (usually a $ref), adding what it refers to under `schemas`.
using SchemaBuilder = std::function<nlohmann::json(nlohmann::json& schemas)>;

enum class ResponseKind {
  kJson,               // application/json of `response`
  kEventStream,        // text/event-stream of `response` messages
  kJsonOrEventStream,  // JSON, or a stream when the request asks for one (?follow=true)
};

struct Route {
  std::string method = {};  // "GET", "POST", "PATCH", "DELETE"
  // A template: literal segments and {param} segments, e.g. "/api/v1/runs/{name}/stop".
  std::string path = {};
  std::string operation_id = {};  // unique, e.g. "stopRun"
  std::string tag = {};           // groups operations in the document: "runs", "nodes", ...
  std::string summary = {};
  std::vector<ParamSpec> params = {};  // every {param} of `path` must be here as a path parameter
  // The JSON body's message, or null when the route takes no body.
  const google::protobuf::Descriptor* request_body = nullptr;
  // The route also takes a run YAML (as `mcli run -f` reads it) as its body.
  bool yaml_body = false;
  // The JSON response's message (kJson, kJsonOrEventStream).
  const google::protobuf::Descriptor* response = nullptr;
  // Streams: the message each event's data carries, and the SSE event name.
  const google::protobuf::Descriptor* stream_message = nullptr;
  std::string event_name = {};
  // When set, these describe the JSON response and each event's data instead of `response` and
  // `stream_message`.
  SchemaBuilder response_schema = {};
  SchemaBuilder stream_schema = {};
  ResponseKind response_kind = ResponseKind::kJson;
  bool requires_auth = true;
  // The RPCs it calls ("tessera.v1.RunService/GetRun"), whose rows in the role table
  // (services/common/auth/rpc_roles.h) say who may use the route; the OpenAPI document shows them.
  std::vector<std::string> rpcs = {};
  Handler handler = {};
};

class RouteTable {
 public:
  // Adds a route. A malformed one (bad template, undeclared or duplicate path parameter, a
  // method+path or operation id already there) is a programming error: it is recorded in
  // status() and the route is left out.
  void Add(Route route);
  const absl::Status& status() const { return status_; }
  const std::vector<Route>& routes() const { return routes_; }

  struct Match {
    const Route* route = nullptr;  // null: no route for this method
    // Raw (still percent-encoded) path parameter values by name.
    std::map<std::string, std::string> path_params;
    // When `route` is null: the methods the path answers (empty: unknown path, 404).
    std::vector<std::string> allowed;
  };
  // The route for `method` and a path without its query. A literal segment is preferred to a
  // parameter, so GET /api/v1/runs/watch is the watch route and not the run named "watch".
  Match Find(std::string_view method, std::string_view path) const;

  // The web console, served at every GET path outside /api/ that no route takes; null: none
  // (such paths answer 404, saying the console is not installed).
  void SetConsole(std::shared_ptr<const ConsoleAssets> console) { console_ = std::move(console); }
  const ConsoleAssets* console() const { return console_.get(); }

 private:
  std::vector<Route> routes_;
  std::shared_ptr<const ConsoleAssets> console_;
  absl::Status status_;
};

// Splits "/a/b/c" into {"a", "b", "c"}; "/" is {}; keeps empty segments ("/a//b/").
std::vector<std::string_view> SplitPath(std::string_view path);

}  // namespace tessera::gateway
