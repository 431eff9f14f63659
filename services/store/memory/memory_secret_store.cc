// Secrets in memory.
#include "absl/strings/str_cat.h"
#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

class MemorySecretStore final : public SecretStore {
 public:
  explicit MemorySecretStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::Status CreateSecret(const SecretRecord& record) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    const auto key = std::make_pair(record.secret.user(), record.secret.name());
    if (db_->secrets.count(key)) {
      return absl::AlreadyExistsError(
          absl::StrCat("secret ", record.secret.name(), " already exists"));
    }
    db_->secrets[key] = record;
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<SecretRecord>> ListSecrets(std::string_view user) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<SecretRecord> out;
    for (const auto& [key, record] : db_->secrets) {
      if (key.first == user) out.push_back(record);
    }
    return out;  // the map orders them by name within a user
  }

  absl::Status DeleteSecret(std::string_view user, std::string_view name) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (db_->secrets.erase({std::string(user), std::string(name)}) == 0) {
      return absl::NotFoundError(absl::StrCat("secret ", std::string(name), " not found"));
    }
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<SecretStore> MakeMemorySecretStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemorySecretStore>(std::move(db));
}

}  // namespace tessera::store
