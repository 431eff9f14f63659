#pragma once
// Remembers the response to each mutating request by its idempotency key, so that a client that
// retries (after a timeout, a dropped connection) gets the first answer instead of a second effect.

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace tessera::store {

// The key of a call to record in the same transaction as its effect, so that the effect and its
// record commit together or not at all: a client that retries after an in-doubt commit finds
// the record, and of two concurrent calls with one key only the first acts.
struct IdempotencyKey {
  std::string scope;
  std::string key;
  std::string request_fingerprint;
  absl::Time recorded_at;
};

// The refusal of a write whose idempotency key another call already recorded (or is recording
// in a transaction that committed first). Nothing of the write took effect; the caller answers
// with the recorded response.
inline constexpr char kKeyTakenPayload[] = "type.tessera.dev/idempotency-key-taken";
inline absl::Status KeyTakenError(std::string_view key) {
  absl::Status st = absl::FailedPreconditionError(
      absl::StrCat("idempotency key \"", std::string(key), "\" was recorded by another call"));
  st.SetPayload(kKeyTakenPayload, absl::Cord("1"));
  return st;
}
inline bool IsKeyTaken(const absl::Status& st) {
  return st.GetPayload(kKeyTakenPayload).has_value();
}

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
