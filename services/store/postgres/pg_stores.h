#pragma once
// The PostgreSQL implementations of the store interfaces, all over one connection pool.

#include <memory>

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

}  // namespace tessera::store
