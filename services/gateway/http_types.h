#pragma once
// What a route handler sees and returns. Nothing here knows about sockets or Beast: the server
// (connection.cc) parses the wire request into a Request and writes a Response, or relays an
// EventSource as Server-Sent Events.

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "services/gateway/event_source.h"
#include "services/gateway/params.h"

namespace tessera::gateway {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path without the query, e.g. "/api/v1/runs/train-1"
  // Decoded path parameters by name ("name" -> "train-1"), validated against the route.
  std::map<std::string, std::string> path_params;
  // Decoded query parameters by name, in the order given, validated against the route.
  std::map<std::string, std::vector<std::string>> query;
  // Header values the gateway uses; empty when absent.
  std::string authorization;
  std::string idempotency_key;
  std::string last_event_id;
  std::string accept;        // the Accept header, for routes that answer JSON or an event stream
  std::string content_type;  // the Content-Type header, as sent
  std::string body;
  // The client's address, forwarded to the services (their audit log records it).
  std::string client_address;
  // The matched route's parameters (what the values above were validated against).
  const std::vector<ParamSpec>* params = nullptr;

  // The first value of a query parameter, or `fallback` when absent.
  const std::string& Query(const std::string& name, const std::string& fallback = Empty()) const;
  // Every value of a query parameter (empty when absent).
  const std::vector<std::string>& QueryAll(const std::string& name) const;
  bool HasQuery(const std::string& name) const { return query.count(name) > 0; }
  const std::string& PathParam(const std::string& name) const;

 private:
  static const std::string& Empty();
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Extra headers, e.g. {"Allow", "GET, POST"}.
  std::vector<std::pair<std::string, std::string>> headers;
};

// A handler answers with a response, or with a source of events that the server relays to the
// client as Server-Sent Events (a stream that fails before its first event becomes a Response).
using HandlerResult = std::variant<Response, std::unique_ptr<EventSource>>;

}  // namespace tessera::gateway
