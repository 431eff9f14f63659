#pragma once
// Users' secrets (secrets.proto), stored sealed: the run manager encrypts each value with the
// key it is given (services/runs/secret_box.h) before it reaches the store, so the database
// never holds one in clear. A secret is named within its user: two users may both have "hf".

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/v1/secrets.pb.h"

namespace tessera::store {

struct SecretRecord {
  v1::Secret secret;   // secret.user and secret.name identify it
  std::string sealed;  // the value, encrypted and authenticated
};

class SecretStore {
 public:
  virtual ~SecretStore() = default;
  // ALREADY_EXISTS when the user has a secret of that name.
  virtual absl::Status CreateSecret(const SecretRecord& record) = 0;
  // The user's secrets, by name.
  virtual absl::StatusOr<std::vector<SecretRecord>> ListSecrets(std::string_view user) = 0;
  // NOT_FOUND when the user has none of that name.
  virtual absl::Status DeleteSecret(std::string_view user, std::string_view name) = 0;
};

}  // namespace tessera::store
