#pragma once
// A long stream's caller, checked again while the stream is open: a key revoked or expired
// ends the stream within the authenticator's cache time (Authenticator::Revalidate: never
// waiting for the store, so a frozen database stalls no stream), with UNAUTHENTICATED saying
// why. Every long server-side stream holds one: follows, watches, shells, log pushes, and the
// workers' control streams.

#include <grpcpp/server_context.h>

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/common/auth/api_keys.h"

namespace tessera::auth {

class StreamGuard {
 public:
  // How long a person's stream may stay open.
  enum class Lifetime {
    // Until the caller leaves or the key no longer holds: streams nobody could resume (shells),
    // and those of nodes and services.
    kUnbounded,
    // At most the authenticator's maximum stream lifetime (Authenticator::max_stream_lifetime),
    // then UNAVAILABLE: follows and watches, which a client opens again and goes on (a follow
    // from its cursor, a watch from a fresh read), so no open stream pins a person's slot, a
    // server's thread or a standby's old answer for ever.
    kReconnecting,
  };

  // For the call `context` of `who` (authenticated already); UNAUTHENTICATED when it carries
  // no key. A person's stream holds one of their slots (Authenticator::AcquireStream) until
  // the guard goes: RESOURCE_EXHAUSTED when they have none left.
  // `cancelled` (when given) says whether the caller went away, for a call on the async API,
  // whose context may not be asked before its end (async_writer.h); else the context is asked.
  static absl::StatusOr<StreamGuard> Open(Authenticator& auth,
                                          const grpc::ServerContextBase& context,
                                          const Principal& who, Lifetime lifetime,
                                          std::function<bool()> cancelled = nullptr);
  StreamGuard(StreamGuard&& other) noexcept;
  StreamGuard& operator=(StreamGuard&&) = delete;
  StreamGuard(const StreamGuard&) = delete;
  ~StreamGuard();

  // OK while the key still holds; the store is asked again (in the background) only once its
  // last answer ran out, so a check at every message or poll costs a clock read.
  absl::Status CheckKey();
  // For handlers' `done` callbacks: true once the caller went away, the key no longer holds
  // or the stream's lifetime is over (then Outcome says so).
  bool Done();
  // What the stream ends with: why the guard ended it, else the handler's own `outcome`.
  absl::Status Outcome(absl::Status outcome) const;

 private:
  StreamGuard(Authenticator& auth, const grpc::ServerContextBase& context, std::string key_hash,
              std::optional<std::string> slot_of, absl::Time ends_at,
              std::function<bool()> cancelled)
      : auth_(&auth),
        context_(&context),
        cancelled_(std::move(cancelled)),
        key_hash_(std::move(key_hash)),
        slot_of_(std::move(slot_of)),
        ends_at_(ends_at) {}

  Authenticator* auth_;
  const grpc::ServerContextBase* context_;
  std::function<bool()> cancelled_;
  std::string key_hash_;
  std::optional<std::string> slot_of_;  // the user whose stream slot this guard holds
  absl::Time ends_at_;                  // the lifetime's end (InfiniteFuture: none)
  absl::Time holds_until_ = absl::InfinitePast();
  absl::Status ended_;
};

}  // namespace tessera::auth
