#pragma once
// One handle on every storage domain, backed either by PostgreSQL or by memory.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "services/store/api_key_store.h"
#include "services/store/audit_store.h"
#include "services/store/change_feed.h"
#include "services/store/health_store.h"
#include "services/store/idempotency_store.h"
#include "services/store/join_token_store.h"
#include "services/store/leader_lock_store.h"
#include "services/store/log_store.h"
#include "services/store/node_event_store.h"
#include "services/store/node_store.h"
#include "services/store/notification_store.h"
#include "services/store/run_store.h"
#include "services/store/secret_store.h"
#include "services/store/team_store.h"
#include "services/store/transaction_observer.h"
#include "services/store/usage_store.h"

namespace tessera::store {

struct Stores {
  std::shared_ptr<RunStore> runs;
  std::shared_ptr<NodeStore> nodes;
  std::shared_ptr<NodeEventStore> node_events;
  std::shared_ptr<HealthStore> health;
  std::shared_ptr<ApiKeyStore> api_keys;
  std::shared_ptr<JoinTokenStore> join_tokens;
  std::shared_ptr<AuditStore> audit;
  std::shared_ptr<IdempotencyStore> idempotency;
  std::shared_ptr<LogStore> logs;
  std::shared_ptr<LeaderLockStore> leader_locks;
  std::shared_ptr<SecretStore> secrets;
  std::shared_ptr<TeamStore> teams;
  std::shared_ptr<UsageStore> usage;
  std::shared_ptr<NotificationStore> notifications;
  // Pushes commits to watchers (change_feed.h).
  std::shared_ptr<ChangeFeed> changes;
};

struct PostgresOptions {
  // A libpq URL (postgresql://user@host:port/db) or key=value string.
  std::string url;
  // Connections kept open; calls beyond that wait for a free one.
  int pool_size = 6;
  // Of those, how many user traffic may not use (store::TrafficClass): the control plane's
  // writes never queue behind people's reads.
  int control_connections = 2;
  // How long a connection attempt may take before the call fails with UNAVAILABLE.
  int connect_timeout_seconds = 3;
  // Told of every transaction (the binaries' metrics); null: nobody.
  std::shared_ptr<TransactionObserver> observer = nullptr;
};

// Connects, applies pending migrations and returns stores over PostgreSQL. UNAVAILABLE when
// the server cannot be reached.
absl::StatusOr<Stores> OpenPostgresStores(const PostgresOptions& options);

// Stores in memory, for unit tests and fast fakes. One shared "database": an update of a node
// with events is visible through node_events, as in PostgreSQL.
Stores MakeMemoryStores();

}  // namespace tessera::store
