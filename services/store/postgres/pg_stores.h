#pragma once
// The PostgreSQL implementations of the store interfaces, all over one connection pool.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "services/store/postgres/pg_pool.h"
#include "services/store/stores.h"

namespace tessera::store {

std::shared_ptr<RunStore> MakePgRunStore(std::shared_ptr<PgPool> pool);
// Fills in the runs.metadata column (migration 0019) of runs written before it, from their
// bodies, in batches; a no-op once every run has it. Called when the stores open.
absl::Status BackfillRunMetadata(PgPool& pool);
std::shared_ptr<NodeStore> MakePgNodeStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<NodeEventStore> MakePgNodeEventStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<HealthStore> MakePgHealthStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<ApiKeyStore> MakePgApiKeyStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<JoinTokenStore> MakePgJoinTokenStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<SecretStore> MakePgSecretStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<NotificationStore> MakePgNotificationStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<TeamStore> MakePgTeamStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<UsageStore> MakePgUsageStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<AuditStore> MakePgAuditStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<IdempotencyStore> MakePgIdempotencyStore(std::shared_ptr<PgPool> pool);
// `changes`: the bundle's change feed (its writer id marks the store's commits).
std::shared_ptr<LogStore> MakePgLogStore(std::shared_ptr<PgPool> pool,
                                         std::shared_ptr<ChangeFeed> changes);

// Leader locks hold connections of their own (a session lock lives as long as its connection),
// opened with `conninfo`, not taken from the pool.
struct LeaderSessionOptions {
  // A holder's session that has been idle this long (its process frozen) is closed by the
  // server, freeing the role; no statement on it waits longer. Holders confirm more often.
  absl::Duration timeout = absl::Seconds(5);
};
std::shared_ptr<LeaderLockStore> MakePgLeaderLockStore(std::string conninfo,
                                                       LeaderSessionOptions options = {});
// The advisory lock key that stands for `role` (tests look the holder up in pg_locks by it).
int64_t PgLeaderLockKey(std::string_view role);

// OK for an unfenced write or one whose term is still the role's current one in leader_terms.
// Takes the row FOR SHARE, so a new leader's term cannot begin until this transaction ends.
absl::Status CheckFence(pqxx::work& tx, const std::optional<WriteFence>& fence);

// Inserts an API key's row in `tx` (a unique violation when its id or hash is taken).
void InsertApiKey(pqxx::work& tx, const ApiKeyRecord& record);

// Claims a call's idempotency key in a write's transaction, before the write's effect, so that
// the effect and its record commit together. KeyTakenError when another call recorded the key;
// a concurrent call with the key waits here until the first one's transaction ends.
absl::Status ClaimIdempotencyKey(pqxx::work& tx, const IdempotencyKey& key);
// The response of the call whose key ClaimIdempotencyKey claimed in `tx`.
void RecordClaimedResponse(pqxx::work& tx, const IdempotencyKey& key, const std::string& response);

}  // namespace tessera::store
