#pragma once
// Makes a mutating RPC idempotent by its request's idempotency_key: the first call runs and its
// response is recorded; a retry with the same key and the same request gets that response again
// without a second effect; the same key with a different request is INVALID_ARGUMENT.
//
// RunAtomically records the response in the same transaction as the call's effect (the body
// hands the key to its store write), so an in-doubt commit and a retry, or two concurrent calls
// with one key, act once. Run records it after the effect: only for calls whose effect is
// itself idempotent (setting a state), as the two can be separated by a fault.

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "base/clock.h"
#include "google/protobuf/message.h"
#include "services/store/idempotency_store.h"

namespace tessera {

class IdempotentCalls {
 public:
  IdempotentCalls(std::shared_ptr<store::IdempotencyStore> store, std::shared_ptr<Clock> clock)
      : store_(std::move(store)), clock_(std::move(clock)) {}

  // `scope` separates methods and callers (e.g. "SubmitRun/alice"). An empty key runs `body`
  // without recording anything. Failed calls are not recorded, so they may be retried.
  absl::Status Run(const std::string& scope, const std::string& key,
                   const google::protobuf::Message& request, google::protobuf::Message* response,
                   const std::function<absl::Status()>& body);

  // `body` passes the key (nullopt when the request has none) to the store write that makes its
  // effect, which records the response in its own transaction or returns KeyTakenError.
  using AtomicBody = std::function<absl::Status(const std::optional<store::IdempotencyKey>&)>;
  absl::Status RunAtomically(const std::string& scope, const std::string& key,
                             const google::protobuf::Message& request,
                             google::protobuf::Message* response, const AtomicBody& body);

 private:
  // The recorded answer for `key` into `response`; nullopt when nothing is recorded.
  std::optional<absl::Status> Replay(const std::string& scope, const std::string& key,
                                     const std::string& fingerprint,
                                     google::protobuf::Message* response);

  std::shared_ptr<store::IdempotencyStore> store_;
  std::shared_ptr<Clock> clock_;
};

// SHA-256 (hex) of the request's deterministic serialization, idempotency_key left out.
std::string RequestFingerprint(const google::protobuf::Message& request);

}  // namespace tessera
