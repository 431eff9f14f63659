#pragma once
// API key administration: admins make keys (user, operator, admin, node), everyone lists and
// revokes their own. A secret is returned once and kept nowhere but in the caller's hands.
// Admins also make join tokens (a new node's one-time credential: join_handler.h) and read the
// audit log.

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/common/idempotency.h"
#include "services/store/api_key_store.h"
#include "services/store/audit_store.h"
#include "services/store/join_token_store.h"
#include "tessera/v1/admin.pb.h"

namespace tessera::admin {

class AdminHandler {
 public:
  AdminHandler(std::shared_ptr<store::ApiKeyStore> keys,
               std::shared_ptr<store::JoinTokenStore> join_tokens,
               std::shared_ptr<store::AuditStore> audit, std::shared_ptr<IdempotentCalls> idem,
               std::shared_ptr<Clock> clock);

  // A retry with the same idempotency key is ALREADY_EXISTS naming the key made the first time:
  // its secret was shown once and is not kept, so it cannot be shown again.
  absl::Status CreateApiKey(const auth::Principal& who, const v1::CreateApiKeyRequest& req,
                            v1::CreateApiKeyResponse* resp);
  absl::Status ListApiKeys(const auth::Principal& who, const v1::ListApiKeysRequest& req,
                           v1::ListApiKeysResponse* resp);
  absl::Status RevokeApiKey(const auth::Principal& who, const v1::RevokeApiKeyRequest& req,
                            v1::RevokeApiKeyResponse* resp);
  absl::Status WhoAmI(const auth::Principal& who, const v1::WhoAmIRequest& req,
                      v1::WhoAmIResponse* resp);

  // Join tokens (admin_join_tokens.cc). Like a key's, a token's secret is shown once: a retry
  // with the same idempotency key is ALREADY_EXISTS naming the token.
  absl::Status CreateJoinToken(const auth::Principal& who, const v1::CreateJoinTokenRequest& req,
                               v1::CreateJoinTokenResponse* resp);
  absl::Status ListJoinTokens(const auth::Principal& who, const v1::ListJoinTokensRequest& req,
                              v1::ListJoinTokensResponse* resp);
  absl::Status RevokeJoinToken(const auth::Principal& who, const v1::RevokeJoinTokenRequest& req,
                               v1::RevokeJoinTokenResponse* resp);
  absl::Status ListAuditRecords(const auth::Principal& who, const v1::ListAuditRecordsRequest& req,
                                v1::ListAuditRecordsResponse* resp);

 private:
  std::shared_ptr<store::ApiKeyStore> keys_;
  std::shared_ptr<store::JoinTokenStore> join_tokens_;
  std::shared_ptr<store::AuditStore> audit_;
  std::shared_ptr<IdempotentCalls> idem_;
  std::shared_ptr<Clock> clock_;
};

// Creates a key without a caller (for `tessera-server create-api-key`, run by an operator on the
// server's machine, and for the services' own keys). `request` is validated as CreateApiKey's.
// Returns the secret.
absl::StatusOr<std::string> CreateApiKeyDirect(store::ApiKeyStore& keys, const Clock& clock,
                                               const v1::CreateApiKeyRequest& request);

// Makes a join token without a caller (`tessera-server create-join-token`, run by an operator on
// the server's machine). Returns the secret.
absl::StatusOr<std::string> CreateJoinTokenDirect(store::JoinTokenStore& tokens, const Clock& clock,
                                                  const v1::CreateJoinTokenRequest& request,
                                                  const std::string& created_by);

// Makes something whose secret is shown once (an API key, a join token): `make` stores it under
// `id` and returns the secret. No idempotency record is kept (it would hold the secret): a request
// with an idempotency key has an id derived from it instead, so a retry is refused by the store,
// and is answered ALREADY_EXISTS naming what (`what`, e.g. "API key") the first request made.
absl::StatusOr<std::string> CreateShownOnce(
    const std::string& what, const std::string& idempotency_key, const std::string& id,
    const std::function<absl::StatusOr<std::string>()>& make);

// INVALID_ARGUMENT unless `user` is 1..64 of [a-z0-9._-] and starts with a letter or digit.
absl::Status ValidateUserName(const std::string& field, const std::string& user);

// The terms an admin sets on a node's join token or key (`field` names them in errors: "terms",
// "node_terms"): names as the scheduler compares them, the GPU count in the range any node may
// report, labels as SetNodeLabels takes them.
absl::Status ValidateNodeTerms(const std::string& field, const v1::NodeTerms& terms);

}  // namespace tessera::admin
