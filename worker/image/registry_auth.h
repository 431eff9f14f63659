// What a registry client needs to prove who it is: the credentials a containers auth.json holds
// for a registry (the file a docker-registry secret becomes, and the one skopeo reads), and the
// challenge in a 401's WWW-Authenticate header (RFC 7235) that says how to use them.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::worker::image {

struct RegistryCredentials {
  std::string username;
  std::string password;
  bool empty() const { return username.empty() && password.empty(); }
};

// The credentials `auth_json` (a containers-auth.json / docker config.json document) holds for
// `repository` on `registry`: the most specific key wins ("host/ns/repo" over "host/ns" over
// "host"), keys may carry a scheme and a "/v1/" or "/v2/" suffix, and Docker Hub's
// "index.docker.io" and "registry-1.docker.io" mean "docker.io". Empty credentials where no key
// matches. INVALID_ARGUMENT, naming the key, for a document or entry that does not parse.
absl::StatusOr<RegistryCredentials> CredentialsFor(absl::string_view auth_json,
                                                   const std::string& registry,
                                                   const std::string& repository);

struct AuthChallenge {
  std::string scheme;                         // lower case: "bearer", "basic"
  std::map<std::string, std::string> params;  // names lower case: realm, service, scope
};

// The first challenge of a WWW-Authenticate header value (registries send one).
// INVALID_ARGUMENT for a value that is not a challenge.
absl::StatusOr<AuthChallenge> ParseAuthChallenge(absl::string_view header);

}  // namespace tessera::worker::image
