#pragma once
// API key secrets: made by OpenSSL's CSPRNG, stored only as SHA-256 hashes, checked on every
// call from the `authorization: Bearer KEY` metadata.

#include <grpcpp/server_context.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/rate_budgets.h"
#include "services/common/auth/audit_log.h"
#include "services/common/auth/peer_identity.h"
#include "services/common/auth/principal.h"
#include "services/common/auth/unknown_key_limiter.h"
#include "services/store/api_key_store.h"

namespace tessera::auth {

// Hex SHA-256 of a secret.
std::string HashSecret(const std::string& secret);

// A new secret: "tsk_" followed by 64 hex digits of OpenSSL's RAND_bytes (256 bits). ABORTS if the
// CSPRNG cannot be seeded (a broken invariant of the host: no key may be made then).
std::string NewSecret();

// A new key id: "key-" followed by 16 hex digits of RAND_bytes.
std::string NewKeyId();

// A new join token: its secret ("tjt_" and 64 hex digits of RAND_bytes) and its id ("jt-" and 16).
std::string NewJoinTokenSecret();
std::string NewJoinTokenId();

// The id of the key made by the request with idempotency key `request_key` in `scope`: a retry
// makes the same id, which the store refuses (ALREADY_EXISTS), so one request makes one key.
std::string KeyIdForRequest(const std::string& scope, const std::string& request_key);

// Extracts KEY from an "authorization" value "Bearer KEY" (the scheme is case-insensitive).
absl::StatusOr<std::string> BearerToken(const std::string& header_value);

class Authenticator {
 public:
  static constexpr double kDefaultUnknownKeysPerSecond = 10;
  static constexpr double kDefaultCallsPerUserPerSecond = 200;

  // Lookups are cached for `cache_ttl` so that a busy client does not cost a database query per
  // call; a revoked key stops working within that time.
  // `audit` (optional) is where Serve records audited calls (rpc_roles.h).
  Authenticator(std::shared_ptr<store::ApiKeyStore> keys, std::shared_ptr<Clock> clock,
                absl::Duration cache_ttl = absl::Seconds(5),
                std::shared_ptr<AuditLog> audit = nullptr);

  // Null when calls are not audited (unit tests).
  AuditLog* audit_log() const { return audit_.get(); }

  ~Authenticator();

  // UNAUTHENTICATED when the key is missing, malformed, unknown, revoked or expired; UNAVAILABLE
  // when the key store cannot be reached. A call's key that is not cached is looked up as the
  // traffic of whoever asked (OriginOf: control traffic only for the services' own calls), and
  // from an address past its budget of unknown keys it is RESOURCE_EXHAUSTED without a lookup
  // (UnknownKeyLimiter). The header-only form is the services' own (control, unlimited).
  absl::StatusOr<Principal> Authenticate(const std::string& authorization_header);
  absl::StatusOr<Principal> Authenticate(const grpc::ServerContextBase& context);

  // Failed key lookups one address may cause a second (10 at once, refilled at this rate); 0: no
  // limit.
  void set_max_unknown_keys_per_address(double per_second) {
    unknown_keys_.set_per_second(per_second);
  }

  // The hash of the key a call carries, for Revalidate: a stream hashes its key once.
  absl::StatusOr<std::string> KeyHash(const grpc::ServerContextBase& context);

  // For a long stream, with its KeyHash: the cached answer for the stream's key, never waiting
  // for the store (a frozen database must not stall a heartbeat). A stale answer is refreshed in
  // the background, so a revoked or expired key ends the stream within about `cache_ttl`; a
  // store that cannot be reached keeps the last answer. A good answer says until when it holds
  // (the cached answer's end or the key's own expiry, whichever is first; Now() while it is
  // being refreshed): the stream need not ask again before then, which spares 10,000 streams a
  // locked lookup at every heartbeat.
  absl::StatusOr<absl::Time> Revalidate(const std::string& key_hash);
  // The time Revalidate's answers are on.
  absl::Time Now() const { return clock_->Now(); }

  // Calls one user (a person of role user: operators and admins, nodes and services are not
  // held to it) may make a second in this process, ten seconds' worth at once; 0 (until set):
  // no limit. The servers set kDefaultCallsPerUserPerSecond unless told otherwise.
  void set_max_calls_per_user_per_second(double per_second) {
    calls_.Reset(per_second, per_second * 10);
  }
  // Counts one call of `who` (Serve does, once the role is checked and before the handler runs,
  // so a refused call reads nothing); RESOURCE_EXHAUSTED naming the limit and when to call again
  // past it.
  absl::Status ChargeCall(const Principal& who);

  // Streams a person may hold open at once in this process (follows, watches, shells; a
  // stream of the REST gateway's is one of its caller's). Zero: no limit.
  void set_max_streams_per_user(int limit) { max_streams_per_user_ = limit; }
  // How long a person's follow or watch may stay open before it ends with UNAVAILABLE, for the
  // client to open it again (StreamGuard::Lifetime::kReconnecting). Zero: no limit.
  void set_max_stream_lifetime(absl::Duration lifetime) {
    absl::MutexLock lock(&streams_mu_);
    max_stream_lifetime_ = lifetime;
  }
  absl::Duration max_stream_lifetime() {
    absl::MutexLock lock(&streams_mu_);
    return max_stream_lifetime_;
  }
  // Takes one of `user`'s stream slots; RESOURCE_EXHAUSTED, naming the limit, when all are
  // taken. ReleaseStream gives it back (StreamGuard does both).
  absl::Status AcquireStream(const std::string& user);
  void ReleaseStream(const std::string& user);

 private:
  struct CacheEntry {
    absl::StatusOr<Principal> principal;
    absl::Time expires;
    // The key's own expiry, checked on every hit.
    absl::Time key_expires = absl::InfiniteFuture();
  };
  absl::StatusOr<Principal> Authenticate(const std::string& authorization_header,
                                         const CallOrigin& origin);
  // The store's answer for `hash`, cached; the store's own error when it cannot be asked.
  absl::StatusOr<CacheEntry> Lookup(const std::string& hash);
  // The answer for a stored key, or for none (an invalid key).
  CacheEntry EntryFor(const store::ApiKeyRecord* record, absl::Time now) const;
  void Cache(const std::string& hash, const CacheEntry& entry);
  // Makes room in a full cache (never by emptying it).
  void EvictLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A cached answer at `now`: the key's own expiry is checked at every use.
  static absl::StatusOr<Principal> Answer(const CacheEntry& entry, absl::Time now);
  void RefreshLoop();

  std::shared_ptr<store::ApiKeyStore> keys_;
  std::shared_ptr<Clock> clock_;
  const absl::Duration cache_ttl_;
  std::shared_ptr<AuditLog> audit_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, CacheEntry> cache_ ABSL_GUARDED_BY(mu_);
  UnknownKeyLimiter unknown_keys_;
  RateBudgets calls_;

  std::atomic<int> max_streams_per_user_{256};
  absl::Mutex streams_mu_;
  absl::flat_hash_map<std::string, int> open_streams_ ABSL_GUARDED_BY(streams_mu_);
  absl::Duration max_stream_lifetime_ ABSL_GUARDED_BY(streams_mu_) = absl::Minutes(30);

  // Hashes whose cached answer went stale while a stream used them.
  absl::Mutex refresh_mu_;
  absl::CondVar refresh_cv_;
  std::deque<std::string> refresh_queue_ ABSL_GUARDED_BY(refresh_mu_);
  bool stopping_ ABSL_GUARDED_BY(refresh_mu_) = false;
  std::thread refresher_;  // started at the first Revalidate
};

}  // namespace tessera::auth
