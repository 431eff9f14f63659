#pragma once
// Remembers the response to each mutating request by its idempotency key, so that a client that
// retries (after a timeout, a dropped connection) gets the first answer instead of a second effect.

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::store {

struct IdempotentResponse {
  // A fingerprint (hash) of the request that produced the response.
  std::string request_fingerprint;
  // The serialized response message.
  std::string response;
};

class IdempotencyStore {
 public:
  virtual ~IdempotencyStore() = default;

  // The recorded response for (scope, key), or nullopt when there is none.
  virtual absl::StatusOr<std::optional<IdempotentResponse>> Lookup(std::string_view scope,
                                                                   std::string_view key) = 0;
  // Records a response. When the key already has one, keeps the first and returns
  // ALREADY_EXISTS (the caller then answers with the recorded one).
  virtual absl::Status Record(std::string_view scope, std::string_view key,
                              const IdempotentResponse& response, absl::Time now) = 0;
  // Forgets responses recorded before `cutoff`; returns how many.
  virtual absl::StatusOr<int64_t> Purge(absl::Time cutoff) = 0;
};

}  // namespace tessera::store
