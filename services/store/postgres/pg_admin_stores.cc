// Join tokens and the audit log in PostgreSQL.
#include <algorithm>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {
namespace {

class PgJoinTokenStore final : public JoinTokenStore {
 public:
  explicit PgJoinTokenStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::Status CreateJoinToken(const JoinTokenRecord& record) override {
    absl::Status st = pool_->Transact("creating a join token", [&](pqxx::work& tx) {
      tx.exec_params(absl::StrCat("INSERT INTO join_tokens (id, secret_hash, node_name, "
                                  "created_at, body) VALUES ($1, $2, $3, ",
                                  MicrosParam(4), ", $5)"),
                     record.token.id(), record.secret_hash, record.token.node(),
                     ToMicros(record.token.created_at()), EncodeMessage(record.token));
      return absl::OkStatus();
    });
    if (absl::IsAlreadyExists(st)) {
      return absl::AlreadyExistsError(
          absl::StrCat("join token ", record.token.id(), " already exists"));
    }
    return st;
  }

  absl::StatusOr<std::vector<v1::JoinToken>> ListJoinTokens() override {
    std::vector<v1::JoinToken> out;
    absl::Status st = pool_->Transact("listing join tokens", [&](pqxx::work& tx) {
      return DecodeBodyRows(
          tx.exec("SELECT body FROM join_tokens ORDER BY created_at DESC, id COLLATE \"C\" DESC"),
          &out);
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status RevokeJoinToken(std::string_view id) override {
    return pool_->Transact("revoking a join token", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows =
          tx.exec_params("SELECT body FROM join_tokens WHERE id = $1 FOR UPDATE", std::string(id));
      if (rows.empty()) {
        return absl::NotFoundError(absl::StrCat("join token ", std::string(id), " not found"));
      }
      v1::JoinToken token;
      TESSERA_RETURN_IF_ERROR(DecodeMessage(rows[0][0], &token));
      token.set_revoked(true);
      tx.exec_params("UPDATE join_tokens SET body = $2 WHERE id = $1", std::string(id),
                     EncodeMessage(token));
      return absl::OkStatus();
    });
  }

  absl::StatusOr<v1::JoinToken> FindJoinToken(std::string_view secret_hash) override {
    v1::JoinToken token;
    absl::Status st = pool_->Transact("reading a join token", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows = tx.exec_params(
          "SELECT body FROM join_tokens WHERE secret_hash = $1", std::string(secret_hash));
      if (rows.empty()) return absl::UnauthenticatedError("invalid join token");
      return DecodeMessage(rows[0][0], &token);
    });
    if (!st.ok()) return st;
    return token;
  }

  absl::StatusOr<v1::JoinToken> FindLastUsedJoinToken(std::string_view node) override {
    std::vector<v1::JoinToken> tokens;
    absl::Status st =
        pool_->Transact("reading a node's join tokens", [&](pqxx::work& tx) -> absl::Status {
          tokens.clear();
          const pqxx::result rows = tx.exec_params(
              "SELECT body FROM join_tokens WHERE node_name = $1", std::string(node));
          for (const auto& row : rows) {
            TESSERA_RETURN_IF_ERROR(DecodeMessage(row[0], &tokens.emplace_back()));
          }
          return absl::OkStatus();
        });
    if (!st.ok()) return st;
    return LastUsedJoinToken(tokens, node);
  }

  absl::StatusOr<v1::JoinToken> RedeemJoinToken(std::string_view secret_hash, std::string_view node,
                                                absl::Time now, const ApiKeyRecord& key) override {
    v1::JoinToken token;
    absl::Status st = pool_->Transact("using a join token", [&](pqxx::work& tx) -> absl::Status {
      // FOR UPDATE: two workers racing with one token take turns; the second sees it used.
      const pqxx::result rows =
          tx.exec_params("SELECT body FROM join_tokens WHERE secret_hash = $1 FOR UPDATE",
                         std::string(secret_hash));
      if (rows.empty()) return absl::UnauthenticatedError("invalid join token");
      TESSERA_RETURN_IF_ERROR(DecodeMessage(rows[0][0], &token));
      TESSERA_RETURN_IF_ERROR(CheckJoinTokenUsable(token, node, now));
      *token.mutable_used_at() = ToProtoTime(now);
      token.set_key_id(key.key.id());
      tx.exec_params("UPDATE join_tokens SET body = $2 WHERE id = $1", token.id(),
                     EncodeMessage(token));
      tx.exec_params("UPDATE api_keys SET revoked = true WHERE node_name = $1 AND NOT revoked",
                     std::string(node));
      InsertApiKey(tx, key);
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return token;
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

class PgAuditStore final : public AuditStore {
 public:
  explicit PgAuditStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::StatusOr<int64_t> AppendAudit(const v1::AuditRecord& record) override {
    int64_t id = 0;
    absl::Status st = pool_->Transact("writing the audit log", [&](pqxx::work& tx) {
      v1::AuditRecord body = record;
      body.clear_id();
      const pqxx::result r = tx.exec_params(
          absl::StrCat("INSERT INTO audit_log (time, actor, action, target, body) VALUES (",
                       MicrosParam(1), ", $2, $3, $4, $5) RETURNING id"),
          ToMicros(record.time()), record.actor(), record.action(), record.target(),
          EncodeMessage(body));
      id = r[0][0].as<int64_t>();
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return id;
  }

  absl::StatusOr<std::vector<v1::AuditRecord>> ListAudit(const AuditQuery& q) override {
    std::vector<v1::AuditRecord> out;
    absl::Status st = pool_->Transact("reading the audit log", [&](pqxx::work& tx) {
      // The action matches exactly, or by method name ("CordonNode") when no service is given.
      const std::string action_suffix =
          q.action.find('/') == std::string::npos && !q.action.empty() ? "/" + q.action : "";
      const pqxx::result rows = tx.exec_params(
          absl::StrCat(
              "SELECT id, body FROM audit_log WHERE time >= ", MicrosParam(1),
              " AND ($2 = '' OR actor = $2)"
              " AND ($3 = '' OR action = $3 OR ($4 <> '' AND right(action, length($4)) = $4))"
              " AND ($5 = '' OR strpos(target, $5) > 0)"
              " AND ($6 = 0 OR id < $6)"
              " ORDER BY id DESC LIMIT $7"),
          // Every record is after 1970: the epoch stands for "since ever".
          absl::ToUnixMicros(std::max(q.since, absl::UnixEpoch())), q.actor, q.action,
          action_suffix, q.target, q.before_id, q.limit);
      return DecodeIdRows(rows, &out);
    });
    if (!st.ok()) return st;
    return out;
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

}  // namespace

std::shared_ptr<JoinTokenStore> MakePgJoinTokenStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgJoinTokenStore>(std::move(pool));
}

std::shared_ptr<AuditStore> MakePgAuditStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgAuditStore>(std::move(pool));
}

}  // namespace tessera::store
