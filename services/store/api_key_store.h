#pragma once
// API keys. Only a hash of each secret is stored.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/v1/admin.pb.h"

namespace tessera::store {

struct ApiKeyRecord {
  v1::ApiKey key;
  // Hex SHA-256 of the secret.
  std::string secret_hash;
};

class ApiKeyStore {
 public:
  virtual ~ApiKeyStore() = default;

  // ALREADY_EXISTS when the id or the hash is taken.
  virtual absl::Status CreateKey(const ApiKeyRecord& record) = 0;
  // NOT_FOUND when no key has this hash (revoked keys are found, with revoked set).
  virtual absl::StatusOr<ApiKeyRecord> FindByHash(std::string_view secret_hash) = 0;
  // The keys of those hashes that exist (revoked ones too), in no order: one read for many,
  // so that re-checking the keys of 10,000 open streams is a few statements, not 10,000.
  virtual absl::StatusOr<std::vector<ApiKeyRecord>> FindByHashes(
      const std::vector<std::string>& secret_hashes) = 0;
  // Every key of a user, or of everyone when `user` is empty; oldest first.
  virtual absl::StatusOr<std::vector<v1::ApiKey>> ListKeys(std::string_view user) = 0;
  // NOT_FOUND when absent.
  virtual absl::Status RevokeKey(std::string_view id) = 0;
};

}  // namespace tessera::store
