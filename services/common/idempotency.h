#pragma once
// Makes a mutating RPC idempotent by its request's idempotency_key: the first call runs and its
// response is recorded; a retry with the same key and the same request gets that response again
// without a second effect; the same key with a different request is INVALID_ARGUMENT.

#include <functional>
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

 private:
  std::shared_ptr<store::IdempotencyStore> store_;
  std::shared_ptr<Clock> clock_;
};

// SHA-256 (hex) of the request's deterministic serialization, idempotency_key left out.
std::string RequestFingerprint(const google::protobuf::Message& request);

}  // namespace tessera
