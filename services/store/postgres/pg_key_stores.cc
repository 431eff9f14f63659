// API keys and idempotency records in PostgreSQL.
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "services/store/postgres/migrations.h"
#include "services/store/postgres/pg_change_feed.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {
namespace {

class PgApiKeyStore final : public ApiKeyStore {
 public:
  explicit PgApiKeyStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::Status CreateKey(const ApiKeyRecord& record) override {
    absl::Status st = pool_->Transact("creating an API key", [&](pqxx::work& tx) {
      InsertApiKey(tx, record);
      return absl::OkStatus();
    });
    if (absl::IsAlreadyExists(st)) {
      return absl::AlreadyExistsError(absl::StrCat("API key ", record.key.id(), " already exists"));
    }
    return st;
  }

  absl::StatusOr<ApiKeyRecord> FindByHash(std::string_view secret_hash) override {
    ApiKeyRecord record;
    absl::Status st = pool_->Transact("looking up an API key", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows =
          tx.exec_params("SELECT body, secret_hash, revoked FROM api_keys WHERE secret_hash = $1",
                         std::string(secret_hash));
      if (rows.empty()) return absl::NotFoundError("no API key with this secret");
      if (auto d = DecodeMessage(rows[0][0], &record.key); !d.ok()) return d;
      record.secret_hash = rows[0][1].as<std::string>();
      record.key.set_revoked(rows[0][2].as<bool>());
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return record;
  }

  absl::StatusOr<std::vector<ApiKeyRecord>> FindByHashes(
      const std::vector<std::string>& secret_hashes) override {
    std::vector<ApiKeyRecord> out;
    if (secret_hashes.empty()) return out;
    absl::Status st = pool_->Transact("looking up API keys", [&](pqxx::work& tx) -> absl::Status {
      out.clear();
      const pqxx::result rows = tx.exec_params(
          "SELECT body, secret_hash, revoked FROM api_keys WHERE secret_hash = ANY($1::text[])",
          PgTextArray(secret_hashes));
      for (const auto& row : rows) {
        ApiKeyRecord record;
        if (auto d = DecodeMessage(row[0], &record.key); !d.ok()) return d;
        record.secret_hash = row[1].as<std::string>();
        record.key.set_revoked(row[2].as<bool>());
        out.push_back(std::move(record));
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<std::vector<v1::ApiKey>> ListKeys(std::string_view user) override {
    std::vector<v1::ApiKey> out;
    absl::Status st = pool_->Transact("listing API keys", [&](pqxx::work& tx) -> absl::Status {
      for (const auto& row :
           tx.exec_params("SELECT body, revoked FROM api_keys WHERE ($1 = '' OR user_name = $1)"
                          " ORDER BY created_at, id COLLATE \"C\"",
                          std::string(user))) {
        v1::ApiKey k;
        if (auto d = DecodeMessage(row[0], &k); !d.ok()) return d;
        k.set_revoked(row[1].as<bool>());
        out.push_back(std::move(k));
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status RevokeKey(std::string_view id) override {
    return pool_->Transact("revoking an API key", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result r =
          tx.exec_params("UPDATE api_keys SET revoked = true WHERE id = $1", std::string(id));
      if (r.affected_rows() == 0)
        return absl::NotFoundError(absl::StrCat("API key ", std::string(id), " not found"));
      return absl::OkStatus();
    });
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

class PgIdempotencyStore final : public IdempotencyStore {
 public:
  explicit PgIdempotencyStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::StatusOr<std::optional<IdempotentResponse>> Lookup(std::string_view scope,
                                                           std::string_view key) override {
    std::optional<IdempotentResponse> out;
    absl::Status st = pool_->Transact("looking up an idempotency key", [&](pqxx::work& tx) {
      const pqxx::result rows = tx.exec_params(
          "SELECT fingerprint, response FROM idempotency_keys WHERE scope = $1 AND key = $2",
          std::string(scope), std::string(key));
      if (!rows.empty()) {
        const pqxx::binarystring bytes(rows[0][1]);
        out = IdempotentResponse{rows[0][0].as<std::string>(), bytes.str()};
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status Record(std::string_view scope, std::string_view key,
                      const IdempotentResponse& response, absl::Time now) override {
    absl::Status st = pool_->Transact("recording an idempotency key", [&](pqxx::work& tx) {
      tx.exec_params(absl::StrCat("INSERT INTO idempotency_keys (scope, key, fingerprint, "
                                  "response, recorded_at) VALUES ($1, $2, $3, $4, ",
                                  MicrosParam(5), ")"),
                     std::string(scope), std::string(key), response.request_fingerprint,
                     pqxx::binarystring(response.response), absl::ToUnixMicros(now));
      return absl::OkStatus();
    });
    if (absl::IsAlreadyExists(st)) {
      return absl::AlreadyExistsError(
          absl::StrCat("idempotency key ", std::string(key), " already used"));
    }
    return st;
  }

  absl::StatusOr<int64_t> Purge(absl::Time cutoff) override {
    int64_t removed = 0;
    absl::Status st = pool_->Transact("purging idempotency keys", [&](pqxx::work& tx) {
      const pqxx::result r = tx.exec_params(
          absl::StrCat("DELETE FROM idempotency_keys WHERE recorded_at < ", MicrosParam(1)),
          absl::ToUnixMicros(cutoff));
      removed = r.affected_rows();
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return removed;
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

}  // namespace

void InsertApiKey(pqxx::work& tx, const ApiKeyRecord& record) {
  tx.exec_params(absl::StrCat("INSERT INTO api_keys (id, user_name, secret_hash, created_at,"
                              " revoked, node_name, body) VALUES ($1, $2, $3, ",
                              MicrosParam(4), ", $5, $6, $7)"),
                 record.key.id(), record.key.user(), record.secret_hash,
                 ToMicros(record.key.created_at()), record.key.revoked(), record.key.node(),
                 EncodeMessage(record.key));
}

absl::Status ClaimIdempotencyKey(pqxx::work& tx, const IdempotencyKey& key) {
  // The response is filled in by RecordClaimedResponse before the transaction commits; no one
  // sees the empty one (a reader sees the row only once it is committed).
  const pqxx::result r = tx.exec_params(
      absl::StrCat("INSERT INTO idempotency_keys (scope, key, fingerprint, response, recorded_at)"
                   " VALUES ($1, $2, $3, ''::bytea, ",
                   MicrosParam(4), ") ON CONFLICT (scope, key) DO NOTHING"),
      key.scope, key.key, key.request_fingerprint, absl::ToUnixMicros(key.recorded_at));
  if (r.affected_rows() == 0) return KeyTakenError(key.key);
  return absl::OkStatus();
}

void RecordClaimedResponse(pqxx::work& tx, const IdempotencyKey& key, const std::string& response) {
  tx.exec_params("UPDATE idempotency_keys SET response = $3 WHERE scope = $1 AND key = $2",
                 key.scope, key.key, pqxx::binarystring(response));
}

std::shared_ptr<ApiKeyStore> MakePgApiKeyStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgApiKeyStore>(std::move(pool));
}

std::shared_ptr<IdempotencyStore> MakePgIdempotencyStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgIdempotencyStore>(std::move(pool));
}

absl::StatusOr<Stores> OpenPostgresStores(const PostgresOptions& options) {
  auto pool =
      std::make_shared<PgPool>(options.url, options.pool_size, options.connect_timeout_seconds,
                               options.control_connections, options.observer);
  if (auto st = ApplyMigrations(*pool, EmbeddedMigrations()); !st.ok()) return st;
  if (auto st = BackfillRunMetadata(*pool); !st.ok()) return st;
  Stores s;
  s.runs = MakePgRunStore(pool);
  s.nodes = MakePgNodeStore(pool);
  s.node_events = MakePgNodeEventStore(pool);
  s.health = MakePgHealthStore(pool);
  s.api_keys = MakePgApiKeyStore(pool);
  s.join_tokens = MakePgJoinTokenStore(pool);
  s.secrets = MakePgSecretStore(pool);
  s.notifications = MakePgNotificationStore(pool);
  s.teams = MakePgTeamStore(pool);
  s.usage = MakePgUsageStore(pool);
  s.audit = MakePgAuditStore(pool);
  s.idempotency = MakePgIdempotencyStore(pool);
  s.changes = std::make_shared<PgChangeFeed>(pool->conninfo());
  s.logs = MakePgLogStore(pool, s.changes);
  s.leader_locks = MakePgLeaderLockStore(pool->conninfo());
  return s;
}

}  // namespace tessera::store
