#pragma once
// Endpoint lists: every client of a Tessera service (workers, the gateway, mcli, services
// calling services) accepts one endpoint or several separated by commas, so that replicas of a
// stateless service (run manager, log, cordon) stand behind one flag and a client moves to the
// next when one goes away. One host:port may also be a DNS name that resolves to several.

#include <arpa/inet.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tessera {

// The endpoints of a comma-separated list, trimmed, empty entries skipped.
inline std::vector<std::string> SplitEndpoints(std::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view e :
       absl::StrSplit(absl::string_view(list.data(), list.size()), ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(e));
  }
  return out;
}

namespace endpoints_internal {
// 4 or 6 for a literal IPv4 a.b.c.d:port or IPv6 [addr]:port endpoint, 0 for a name.
inline int IpFamily(const std::string& endpoint) {
  unsigned char buf[16];
  if (!endpoint.empty() && endpoint.front() == '[') {
    const size_t close = endpoint.find(']');
    if (close == std::string::npos) return 0;
    return inet_pton(AF_INET6, endpoint.substr(1, close - 1).c_str(), buf) == 1 ? 6 : 0;
  }
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return 0;
  return inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), buf) == 1 ? 4 : 0;
}
}  // namespace endpoints_internal

// The gRPC target for an endpoint list: a single endpoint as it is; several IP endpoints as
// gRPC's static address list (ipv4:a:1,b:2), over which a channel connects to the first that
// answers and moves on when it fails. `flag` names the list in errors.
inline absl::StatusOr<std::string> GrpcTarget(const std::string& flag, const std::string& list) {
  const std::vector<std::string> endpoints = SplitEndpoints(list);
  if (endpoints.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": no endpoint (host:port) given"));
  }
  if (endpoints.size() == 1) return endpoints[0];
  const int family = endpoints_internal::IpFamily(endpoints[0]);
  for (const auto& e : endpoints) {
    if (endpoints_internal::IpFamily(e) == 0 || endpoints_internal::IpFamily(e) != family) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": \"", e,
                       "\": several endpoints must all be IPv4 (a.b.c.d:port) or all IPv6 "
                       "([addr]:port) addresses; for names, give one DNS name that resolves to "
                       "every instance"));
    }
  }
  return absl::StrCat(family == 4 ? "ipv4:" : "ipv6:", absl::StrJoin(endpoints, ","));
}

}  // namespace tessera
