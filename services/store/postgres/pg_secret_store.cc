// Secrets in PostgreSQL: sealed by the run manager before they get here.
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {
namespace {

class PgSecretStore final : public SecretStore {
 public:
  explicit PgSecretStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::Status CreateSecret(const SecretRecord& record) override {
    absl::Status st = pool_->Transact("creating a secret", [&](pqxx::work& tx) {
      tx.exec_params("INSERT INTO secrets (user_name, name, body, sealed) VALUES ($1, $2, $3, $4)",
                     record.secret.user(), record.secret.name(), EncodeMessage(record.secret),
                     pqxx::binarystring(record.sealed));
      return absl::OkStatus();
    });
    if (absl::IsAlreadyExists(st)) {
      return absl::AlreadyExistsError(
          absl::StrCat("secret ", record.secret.name(), " already exists"));
    }
    return st;
  }

  absl::StatusOr<std::vector<SecretRecord>> ListSecrets(std::string_view user) override {
    std::vector<SecretRecord> out;
    absl::Status st = pool_->Transact("listing secrets", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows = tx.exec_params(
          "SELECT body, sealed FROM secrets WHERE user_name = $1 ORDER BY name COLLATE \"C\"",
          std::string(user));
      for (const auto& row : rows) {
        SecretRecord r;
        TESSERA_RETURN_IF_ERROR(DecodeMessage(row[0], &r.secret));
        r.sealed = pqxx::binarystring(row[1]).str();
        out.push_back(std::move(r));
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status DeleteSecret(std::string_view user, std::string_view name) override {
    return pool_->Transact("deleting a secret", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result r =
          tx.exec_params("DELETE FROM secrets WHERE user_name = $1 AND name = $2",
                         std::string(user), std::string(name));
      if (r.affected_rows() == 0) {
        return absl::NotFoundError(absl::StrCat("secret ", std::string(name), " not found"));
      }
      return absl::OkStatus();
    });
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

}  // namespace

std::shared_ptr<SecretStore> MakePgSecretStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgSecretStore>(std::move(pool));
}

}  // namespace tessera::store
