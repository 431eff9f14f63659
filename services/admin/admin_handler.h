#pragma once
// API key administration: admins make keys (user, operator, admin, node, system), everyone lists
// and revokes their own. A secret is returned once and kept nowhere but in the caller's hands.

#include <memory>

#include "absl/status/status.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/common/idempotency.h"
#include "services/store/api_key_store.h"
#include "tessera/v1/admin.grpc.pb.h"

namespace tessera::admin {

class AdminHandler {
 public:
  AdminHandler(std::shared_ptr<store::ApiKeyStore> keys, std::shared_ptr<IdempotentCalls> idem,
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

 private:
  std::shared_ptr<store::ApiKeyStore> keys_;
  std::shared_ptr<IdempotentCalls> idem_;
  std::shared_ptr<Clock> clock_;
};

// Creates a key without a caller (for `tessera-server create-api-key`, run by an operator on the
// server's machine, and for the services' own keys). `request` is validated as CreateApiKey's.
// Returns the secret.
absl::StatusOr<std::string> CreateApiKeyDirect(store::ApiKeyStore& keys, const Clock& clock,
                                               const v1::CreateApiKeyRequest& request);

// INVALID_ARGUMENT unless `user` is 1..64 of [a-z0-9._-] and starts with a letter or digit.
absl::Status ValidateUserName(const std::string& field, const std::string& user);

}  // namespace tessera::admin
