#include "services/gateway/dispatch.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/gateway/errors.h"

namespace tessera::gateway {
namespace {

const std::string* Header(const WireRequest& wire, const std::string& name) {
  auto it = wire.headers.find(absl::AsciiStrToLower(name));
  return it == wire.headers.end() ? nullptr : &it->second;
}

bool Printable(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// A path outside the API: the web console's page or one of its files.
Response ServeConsole(const RouteTable& table, const WireRequest& wire, std::string_view path) {
  if (table.console() == nullptr) {
    return ErrorResponse(
        404, "NOT_FOUND",
        absl::StrCat(
            "no route for ", std::string(path),
            " (the web console is not installed on this gateway: deploy/install-deps.sh "
            "fetches its libraries and deploy/build.sh builds it; the API is at /api/v1/)"));
  }
  const std::string* if_none_match = Header(wire, "if-none-match");
  return table.console()->Serve(path, if_none_match == nullptr ? "" : *if_none_match);
}

}  // namespace

HandlerResult Dispatch(const RouteTable& table, WireRequest wire) {
  std::string_view target = wire.target;
  if (target.empty() || target.front() != '/') {
    return BadRequest("the request target must be a path starting with /");
  }
  const std::size_t hash = target.find('#');
  if (hash != std::string_view::npos) target = target.substr(0, hash);
  const std::size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);

  RouteTable::Match match = table.Find(wire.method, path);
  if (match.route == nullptr) {
    if (match.allowed.empty() && wire.method == "GET" && !path.starts_with("/api/")) {
      return ServeConsole(table, wire, path);
    }
    if (match.allowed.empty()) {
      return ErrorResponse(404, "NOT_FOUND", absl::StrCat("no route for ", std::string(path)));
    }
    const std::string allow = absl::StrJoin(match.allowed, ", ");
    Response r = ErrorResponse(405, "METHOD_NOT_ALLOWED",
                               absl::StrCat(wire.method, " is not allowed on ", std::string(path),
                                            " (allowed: ", allow, ")"));
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  const Route& route = *match.route;

  Request request;
  request.method = wire.method;
  request.params = &route.params;
  request.body = std::move(wire.body);
  request.path = std::string(path);
  for (const ParamSpec& spec : route.params) {
    if (spec.in == ParamIn::kPath) {
      auto decoded = DecodePathSegment(match.path_params[spec.name]);
      if (!decoded.ok()) {
        return BadRequest(absl::StrCat("path parameter \"", spec.name,
                                       "\": ", std::string(decoded.status().message())));
      }
      if (absl::Status st = ValidateParam(spec, *decoded); !st.ok()) return ErrorResponse(st);
      request.path_params[spec.name] = *std::move(decoded);
    } else if (spec.in == ParamIn::kHeader) {
      const std::string* value = Header(wire, spec.name);
      if (value == nullptr) continue;
      if (absl::Status st = ValidateParam(spec, *value); !st.ok()) return ErrorResponse(st);
      const std::string lower = absl::AsciiStrToLower(spec.name);
      if (lower == "idempotency-key") request.idempotency_key = *value;
      if (lower == "last-event-id") request.last_event_id = *value;
    }
  }

  auto pairs = ParseQueryString(query);
  if (!pairs.ok()) return ErrorResponse(pairs.status());
  if (absl::Status st = BindQuery(route.params, *pairs, request.query); !st.ok()) {
    return ErrorResponse(st);
  }

  if (const std::string* accept = Header(wire, "accept")) request.accept = *accept;
  if (const std::string* type = Header(wire, "content-type")) request.content_type = *type;
  request.client_address = wire.peer;
  if (const std::string* auth = Header(wire, "authorization")) {
    // Forwarded as gRPC metadata, which takes printable ASCII only.
    if (!Printable(*auth)) {
      return BadRequest("header \"Authorization\": expected printable ASCII (Bearer <key>)");
    }
    request.authorization = *auth;
  }

  try {
    return route.handler(request);
  } catch (const std::exception& e) {
    spdlog::error("gateway: {} {} threw: {}", route.method, route.path, e.what());
  } catch (...) {
    spdlog::error("gateway: {} {} threw", route.method, route.path);
  }
  return ErrorResponse(500, "INTERNAL", "internal error");
}

}  // namespace tessera::gateway
