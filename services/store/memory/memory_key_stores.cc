// API keys and idempotency records in memory.
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "services/store/filters.h"
#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace {

class MemoryApiKeyStore final : public ApiKeyStore {
 public:
  explicit MemoryApiKeyStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::Status CreateKey(const ApiKeyRecord& record) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    for (const auto& [id, existing] : db_->api_keys) {
      if (id == record.key.id() || existing.secret_hash == record.secret_hash) {
        return absl::AlreadyExistsError(
            absl::StrCat("API key ", record.key.id(), " already exists"));
      }
    }
    db_->api_keys[record.key.id()] = record;
    return absl::OkStatus();
  }

  absl::StatusOr<ApiKeyRecord> FindByHash(std::string_view secret_hash) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    for (const auto& [id, record] : db_->api_keys) {
      if (record.secret_hash == secret_hash) return record;
    }
    return absl::NotFoundError("no API key with this secret");
  }

  absl::StatusOr<std::vector<ApiKeyRecord>> FindByHashes(
      const std::vector<std::string>& secret_hashes) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    const absl::flat_hash_set<std::string> wanted(secret_hashes.begin(), secret_hashes.end());
    std::vector<ApiKeyRecord> out;
    for (const auto& [id, record] : db_->api_keys) {
      if (wanted.contains(record.secret_hash)) out.push_back(record);
    }
    return out;
  }

  absl::StatusOr<std::vector<v1::ApiKey>> ListKeys(std::string_view user) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::ApiKey> out;
    for (const auto& [id, record] : db_->api_keys) {
      if (user.empty() || record.key.user() == user) out.push_back(record.key);
    }
    std::sort(out.begin(), out.end(), [](const v1::ApiKey& a, const v1::ApiKey& b) {
      const int64_t ta = ToMicros(a.created_at()), tb = ToMicros(b.created_at());
      return ta != tb ? ta < tb : a.id() < b.id();
    });
    return out;
  }

  absl::Status RevokeKey(std::string_view id) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->api_keys.find(std::string(id));
    if (it == db_->api_keys.end())
      return absl::NotFoundError(absl::StrCat("API key ", std::string(id), " not found"));
    it->second.key.set_revoked(true);
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

class MemoryIdempotencyStore final : public IdempotencyStore {
 public:
  explicit MemoryIdempotencyStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::StatusOr<std::optional<IdempotentResponse>> Lookup(std::string_view scope,
                                                           std::string_view key) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->idempotency.find({std::string(scope), std::string(key)});
    if (it == db_->idempotency.end()) return std::nullopt;
    return it->second.response;
  }

  absl::Status Record(std::string_view scope, std::string_view key,
                      const IdempotentResponse& response, absl::Time now) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto [it, inserted] = db_->idempotency.try_emplace(
        {std::string(scope), std::string(key)}, MemoryDatabase::RecordedResponse{response, now});
    if (!inserted) {
      return absl::AlreadyExistsError(
          absl::StrCat("idempotency key ", std::string(key), " already used"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> Purge(absl::Time cutoff) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    return static_cast<int64_t>(std::erase_if(
        db_->idempotency, [&](const auto& kv) { return kv.second.recorded_at < cutoff; }));
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<ApiKeyStore> MakeMemoryApiKeyStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryApiKeyStore>(std::move(db));
}

std::shared_ptr<IdempotencyStore> MakeMemoryIdempotencyStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryIdempotencyStore>(std::move(db));
}

Stores MakeMemoryStores(std::shared_ptr<MemoryDatabase> db) {
  Stores s;
  s.runs = MakeMemoryRunStore(db);
  s.nodes = MakeMemoryNodeStore(db);
  s.node_events = MakeMemoryNodeEventStore(db);
  s.health = MakeMemoryHealthStore(db);
  s.api_keys = MakeMemoryApiKeyStore(db);
  s.join_tokens = MakeMemoryJoinTokenStore(db);
  s.audit = MakeMemoryAuditStore(db);
  s.idempotency = MakeMemoryIdempotencyStore(db);
  s.logs = MakeMemoryLogStore(db);
  s.leader_locks = MakeMemoryLeaderLockStore(db);
  s.secrets = MakeMemorySecretStore(db);
  s.notifications = MakeMemoryNotificationStore(db);
  s.teams = MakeMemoryTeamStore(db);
  s.usage = MakeMemoryUsageStore(db);
  s.changes = db->changes;
  return s;
}

Stores MakeMemoryStores() { return MakeMemoryStores(std::make_shared<MemoryDatabase>()); }

}  // namespace tessera::store
