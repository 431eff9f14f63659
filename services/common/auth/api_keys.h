#pragma once
// API key secrets: made from injected randomness, stored only as SHA-256 hashes, checked on every
// call from the `authorization: Bearer KEY` metadata.

#include <grpcpp/server_context.h>

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/store/api_key_store.h"

namespace tessera::auth {

// Hex SHA-256 of a secret.
std::string HashSecret(const std::string& secret);

// A new secret: "tsk_" followed by 40 characters of [a-z0-9] (206 bits).
std::string NewSecret(absl::BitGenRef gen);

// A new key id: "key-" followed by 12 characters of [a-z0-9].
std::string NewKeyId(absl::BitGenRef gen);

// Extracts KEY from an "authorization" value "Bearer KEY" (the scheme is case-insensitive).
absl::StatusOr<std::string> BearerToken(const std::string& header_value);

class Authenticator {
 public:
  // Lookups are cached for `cache_ttl` so that a busy client does not cost a database query per
  // call; a revoked key stops working within that time.
  Authenticator(std::shared_ptr<store::ApiKeyStore> keys, std::shared_ptr<Clock> clock,
                absl::Duration cache_ttl = absl::Seconds(5));

  // UNAUTHENTICATED when the key is missing, malformed, unknown or revoked; UNAVAILABLE when
  // the key store cannot be reached.
  absl::StatusOr<Principal> Authenticate(const std::string& authorization_header);
  absl::StatusOr<Principal> Authenticate(const grpc::ServerContext& context);

 private:
  struct CacheEntry {
    absl::StatusOr<Principal> principal;
    absl::Time expires;
  };
  std::shared_ptr<store::ApiKeyStore> keys_;
  std::shared_ptr<Clock> clock_;
  const absl::Duration cache_ttl_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, CacheEntry> cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::auth
