#pragma once
// Users' secrets (secrets.proto): each user creates, lists and deletes their own; values are
// sealed (secret_box.h) before they are stored and are never returned to a person, only to the
// scheduler (GetRunSecrets, system key) when it starts one of the owner's runs.

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/runs/secret_box.h"
#include "services/store/run_store.h"
#include "services/store/secret_store.h"
#include "tessera/v1/secrets.pb.h"

namespace tessera::runs {

inline constexpr int kMaxSecretsPerUser = 100;
inline constexpr size_t kMaxSecretBytes = 64 * 1024;

class SecretManager {
 public:
  // Without a box (no --secrets-key-file) the cluster keeps no secrets: creating one is
  // refused, saying how to give the key.
  SecretManager(std::shared_ptr<store::SecretStore> secrets, std::shared_ptr<store::RunStore> runs,
                std::optional<SecretBox> box, std::shared_ptr<Clock> clock);

  using Who = auth::Principal;
  absl::Status CreateSecret(const Who& who, const v1::CreateSecretRequest& req,
                            v1::CreateSecretResponse* resp);
  absl::Status ListSecrets(const Who& who, const v1::ListSecretsRequest& req,
                           v1::ListSecretsResponse* resp);
  absl::Status DeleteSecret(const Who& who, const v1::DeleteSecretRequest& req,
                            v1::DeleteSecretResponse* resp);
  absl::Status GetRunSecrets(const Who& who, const v1::GetRunSecretsRequest& req,
                             v1::GetRunSecretsResponse* resp);

 private:
  const std::shared_ptr<store::SecretStore> secrets_;
  const std::shared_ptr<store::RunStore> runs_;
  const std::optional<SecretBox> box_;
  const std::shared_ptr<Clock> clock_;
};

// What is wrong with `secret` (its name, type and the fields its type needs), naming the field;
// OK when it is well formed. Exposed for unit tests and mcli's own checks.
absl::Status ValidateSecret(const v1::Secret& secret, size_t value_bytes);

}  // namespace tessera::runs
