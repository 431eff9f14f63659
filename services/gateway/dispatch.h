#pragma once
// From a parsed HTTP request to a handler's result: route lookup (404, 405 with Allow), path,
// query and header parameter validation (400 naming the parameter), then the handler. No I/O.

#include <map>
#include <string>

#include "services/gateway/http_types.h"
#include "services/gateway/route_table.h"

namespace tessera::gateway {

struct WireRequest {
  std::string method;
  std::string target;  // as sent: path and query, still percent-encoded
  // Header names in lower case; the first value of each.
  std::map<std::string, std::string> headers;
  std::string body;
  // The client's address ("10.1.2.3:51234"), forwarded to the services for their audit log.
  std::string peer = {};
};

// Never throws: a handler's exception becomes a 500.
HandlerResult Dispatch(const RouteTable& table, WireRequest wire);

}  // namespace tessera::gateway
