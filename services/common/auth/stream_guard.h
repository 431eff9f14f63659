#pragma once
// A long stream's caller, checked again while the stream is open: a key revoked or expired
// ends the stream within the authenticator's cache time (Authenticator::Revalidate: never
// waiting for the store, so a frozen database stalls no stream), with UNAUTHENTICATED saying
// why. Every long server-side stream holds one: follows, watches, shells, log pushes, and the
// workers' control streams.

#include <grpcpp/server_context.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/common/auth/api_keys.h"

namespace tessera::auth {

class StreamGuard {
 public:
  // For the call `context` of `who` (authenticated already); UNAUTHENTICATED when it carries
  // no key. A person's stream holds one of their slots (Authenticator::AcquireStream) until
  // the guard goes: RESOURCE_EXHAUSTED when they have none left.
  static absl::StatusOr<StreamGuard> Open(Authenticator& auth,
                                          const grpc::ServerContextBase& context,
                                          const Principal& who);
  StreamGuard(StreamGuard&& other) noexcept;
  StreamGuard& operator=(StreamGuard&&) = delete;
  StreamGuard(const StreamGuard&) = delete;
  ~StreamGuard();

  // OK while the key still holds; the store is asked again (in the background) only once its
  // last answer ran out, so a check at every message or poll costs a clock read.
  absl::Status CheckKey();
  // For handlers' `done` callbacks: true once the caller went away or the key no longer
  // holds (then Outcome says so).
  bool Done();
  // What the stream ends with: why the guard ended it, else the handler's own `outcome`.
  absl::Status Outcome(absl::Status outcome) const;

 private:
  StreamGuard(Authenticator& auth, const grpc::ServerContextBase& context, std::string key_hash,
              std::optional<std::string> slot_of)
      : auth_(&auth),
        context_(&context),
        key_hash_(std::move(key_hash)),
        slot_of_(std::move(slot_of)) {}

  Authenticator* auth_;
  const grpc::ServerContextBase* context_;
  std::string key_hash_;
  std::optional<std::string> slot_of_;  // the user whose stream slot this guard holds
  absl::Time holds_until_ = absl::InfinitePast();
  absl::Status ended_;
};

}  // namespace tessera::auth
