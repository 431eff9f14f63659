#pragma once
// The PostgreSQL implementations of the store interfaces, all over one connection pool.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "services/store/postgres/pg_pool.h"
#include "services/store/stores.h"

namespace tessera::store {

std::shared_ptr<RunStore> MakePgRunStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<NodeStore> MakePgNodeStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<NodeEventStore> MakePgNodeEventStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<HealthStore> MakePgHealthStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<ApiKeyStore> MakePgApiKeyStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<IdempotencyStore> MakePgIdempotencyStore(std::shared_ptr<PgPool> pool);
std::shared_ptr<LogStore> MakePgLogStore(std::shared_ptr<PgPool> pool);

// Leader locks hold connections of their own (a session lock lives as long as its connection),
// opened with `conninfo`, not taken from the pool.
std::shared_ptr<LeaderLockStore> MakePgLeaderLockStore(std::string conninfo);
// The advisory lock key that stands for `role` (tests look the holder up in pg_locks by it).
int64_t PgLeaderLockKey(std::string_view role);

}  // namespace tessera::store
