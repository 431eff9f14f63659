// Join tokens and the audit log in memory.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "services/store/filters.h"
#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

class MemoryJoinTokenStore final : public JoinTokenStore {
 public:
  explicit MemoryJoinTokenStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::Status CreateJoinToken(const JoinTokenRecord& record) override {
    absl::MutexLock lock(&db_->mu);
    TESSERA_RETURN_IF_ERROR(db_->CheckAvailable());
    for (const auto& [id, existing] : db_->join_tokens) {
      if (id == record.token.id() || existing.secret_hash == record.secret_hash) {
        return absl::AlreadyExistsError(
            absl::StrCat("join token ", record.token.id(), " already exists"));
      }
    }
    db_->join_tokens[record.token.id()] = record;
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<v1::JoinToken>> ListJoinTokens() override {
    absl::MutexLock lock(&db_->mu);
    TESSERA_RETURN_IF_ERROR(db_->CheckAvailable());
    std::vector<v1::JoinToken> out;
    for (const auto& [id, record] : db_->join_tokens) out.push_back(record.token);
    std::sort(out.begin(), out.end(), [](const v1::JoinToken& a, const v1::JoinToken& b) {
      const int64_t ta = ToMicros(a.created_at()), tb = ToMicros(b.created_at());
      return ta != tb ? ta > tb : a.id() > b.id();
    });
    return out;
  }

  absl::Status RevokeJoinToken(std::string_view id) override {
    absl::MutexLock lock(&db_->mu);
    TESSERA_RETURN_IF_ERROR(db_->CheckAvailable());
    auto it = db_->join_tokens.find(std::string(id));
    if (it == db_->join_tokens.end()) {
      return absl::NotFoundError(absl::StrCat("join token ", std::string(id), " not found"));
    }
    it->second.token.set_revoked(true);
    return absl::OkStatus();
  }

  absl::StatusOr<v1::JoinToken> FindJoinToken(std::string_view secret_hash) override {
    absl::MutexLock lock(&db_->mu);
    TESSERA_RETURN_IF_ERROR(db_->CheckAvailable());
    for (const auto& [id, entry] : db_->join_tokens) {
      if (entry.secret_hash == secret_hash) return entry.token;
    }
    return absl::UnauthenticatedError("invalid join token");
  }

  absl::StatusOr<v1::JoinToken> FindLastUsedJoinToken(std::string_view node) override {
    absl::MutexLock lock(&db_->mu);
    TESSERA_RETURN_IF_ERROR(db_->CheckAvailable());
    std::vector<v1::JoinToken> tokens;
    for (const auto& [id, entry] : db_->join_tokens) tokens.push_back(entry.token);
    return LastUsedJoinToken(tokens, node);
  }

  absl::StatusOr<v1::JoinToken> RedeemJoinToken(std::string_view secret_hash, std::string_view node,
                                                absl::Time now, const ApiKeyRecord& key) override {
    absl::MutexLock lock(&db_->mu);
    TESSERA_RETURN_IF_ERROR(db_->CheckAvailable());
    auto it =
        std::find_if(db_->join_tokens.begin(), db_->join_tokens.end(),
                     [&](const auto& entry) { return entry.second.secret_hash == secret_hash; });
    if (it == db_->join_tokens.end()) return absl::UnauthenticatedError("invalid join token");
    v1::JoinToken& token = it->second.token;
    TESSERA_RETURN_IF_ERROR(CheckJoinTokenUsable(token, node, now));
    for (const auto& [id, existing] : db_->api_keys) {
      if (id == key.key.id() || existing.secret_hash == key.secret_hash) {
        return absl::AlreadyExistsError(absl::StrCat("API key ", key.key.id(), " already exists"));
      }
    }
    for (auto& [id, existing] : db_->api_keys) {
      if (existing.key.node() == node) existing.key.set_revoked(true);
    }
    db_->api_keys[key.key.id()] = key;
    *token.mutable_used_at() = ToProtoTime(now);
    token.set_key_id(key.key.id());
    return token;
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

class MemoryAuditStore final : public AuditStore {
 public:
  explicit MemoryAuditStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::StatusOr<int64_t> AppendAudit(const v1::AuditRecord& record) override {
    absl::MutexLock lock(&db_->mu);
    TESSERA_RETURN_IF_ERROR(db_->CheckAvailable());
    v1::AuditRecord stored = record;
    stored.set_id(db_->next_audit_id++);
    db_->audit.push_back(std::move(stored));
    return db_->audit.back().id();
  }

  absl::StatusOr<std::vector<v1::AuditRecord>> ListAudit(const AuditQuery& q) override {
    absl::MutexLock lock(&db_->mu);
    TESSERA_RETURN_IF_ERROR(db_->CheckAvailable());
    std::vector<v1::AuditRecord> out;
    const int64_t since = absl::ToUnixMicros(std::max(q.since, absl::UnixEpoch()));
    for (auto it = db_->audit.rbegin(); it != db_->audit.rend(); ++it) {
      if (static_cast<int>(out.size()) >= q.limit) break;
      if (q.before_id != 0 && it->id() >= q.before_id) continue;
      if (ToMicros(it->time()) < since) continue;
      if (!q.actor.empty() && it->actor() != q.actor) continue;
      if (!AuditActionMatches(it->action(), q.action)) continue;
      if (!q.target.empty() && it->target().find(q.target) == std::string::npos) continue;
      out.push_back(*it);
    }
    return out;
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<JoinTokenStore> MakeMemoryJoinTokenStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryJoinTokenStore>(std::move(db));
}

std::shared_ptr<AuditStore> MakeMemoryAuditStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryAuditStore>(std::move(db));
}

}  // namespace tessera::store
