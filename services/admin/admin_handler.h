#pragma once
// API key administration.

#include <memory>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/common/idempotency.h"
#include "services/store/api_key_store.h"
#include "tessera/v1/admin.grpc.pb.h"

namespace tessera::admin {

class AdminHandler {
 public:
  AdminHandler(std::shared_ptr<store::ApiKeyStore> keys, std::shared_ptr<IdempotentCalls> idem,
               std::shared_ptr<Clock> clock, absl::BitGen gen = absl::BitGen());

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
  absl::Mutex gen_mu_;
  absl::BitGen gen_ ABSL_GUARDED_BY(gen_mu_);
};

// Creates a key without a caller (for `tessera-server create-api-key`, run by an operator on the
// server's machine). Returns the secret.
absl::StatusOr<std::string> CreateApiKeyDirect(store::ApiKeyStore& keys, const Clock& clock,
                                               const std::string& user, v1::Role role,
                                               const std::string& description);

// INVALID_ARGUMENT unless `user` is 1..64 of [a-z0-9._-] and starts with a letter or digit.
absl::Status ValidateUserName(const std::string& field, const std::string& user);

}  // namespace tessera::admin
