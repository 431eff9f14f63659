#pragma once
// Join tokens: one-time credentials with which a new node gets its node key. Only a hash of each
// secret is stored. Using a token and making the node's key happen in one transaction, so a
// token makes one key at most, however many workers race with it.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/store/api_key_store.h"
#include "tessera/v1/admin.pb.h"

namespace tessera::store {

struct JoinTokenRecord {
  v1::JoinToken token;
  // Hex SHA-256 of the secret.
  std::string secret_hash;
};

class JoinTokenStore {
 public:
  virtual ~JoinTokenStore() = default;

  // ALREADY_EXISTS when the id or the hash is taken.
  virtual absl::Status CreateJoinToken(const JoinTokenRecord& record) = 0;
  // Every token, newest first.
  virtual absl::StatusOr<std::vector<v1::JoinToken>> ListJoinTokens() = 0;
  // NOT_FOUND when absent. A used token can be revoked too (it changes nothing then).
  virtual absl::Status RevokeJoinToken(std::string_view id) = 0;

  // The token whose secret hashes to `secret_hash`, as it is (used or not); UNAUTHENTICATED when
  // none has. Join checks it before any work for the caller (signing a certificate).
  virtual absl::StatusOr<v1::JoinToken> FindJoinToken(std::string_view secret_hash) = 0;
  // Uses the token whose secret hashes to `secret_hash` for `node` at `now`, and in the same
  // transaction revokes every earlier key of `node` (joining again replaces a node's credential)
  // and creates `key` (a node key of `node`). Returns the token as used. UNAUTHENTICATED when no
  // token has this hash; PERMISSION_DENIED naming why when it cannot be used (used, revoked,
  // expired, or made for another node): only a holder of the secret learns that.
  // The token `node` joined with last (the most recently used of those made for it), whose
  // terms its registrations are held to; NOT_FOUND when it joined with none (a node key made
  // otherwise).
  virtual absl::StatusOr<v1::JoinToken> FindLastUsedJoinToken(std::string_view node) = 0;
  virtual absl::StatusOr<v1::JoinToken> RedeemJoinToken(std::string_view secret_hash,
                                                        std::string_view node, absl::Time now,
                                                        const ApiKeyRecord& key) = 0;
};

// Why `token` cannot be used by `node` at `now`; OK when it can. Shared by the implementations.
absl::Status CheckJoinTokenUsable(const v1::JoinToken& token, std::string_view node,
                                  absl::Time now);

// Of `tokens`, the one `node` used last; NOT_FOUND when it used none. Shared likewise.
absl::StatusOr<v1::JoinToken> LastUsedJoinToken(const std::vector<v1::JoinToken>& tokens,
                                                std::string_view node);

}  // namespace tessera::store
