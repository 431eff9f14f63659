// PostgreSQL-only behaviour: migrations, and surviving a server restart mid-test.
#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <pqxx/pqxx>
#include <thread>

#include "absl/synchronization/notification.h"
#include "base/timestamps.h"
#include "services/common/db_metrics.h"
#include "services/store/postgres/migrations.h"
#include "services/store/postgres/pg_pool.h"
#include "services/store/stores.h"
#include "services/store/traffic_class.h"
#include "tests/support/metric_values.h"
#include "tests/support/postgres_server.h"

namespace tessera::store {
namespace store_postgres_faults_test {

v1::Run MakeRun(const std::string& name) {
  v1::Run run;
  run.set_id("id-" + name);
  run.set_name(name);
  run.set_user("alice");
  run.set_status(v1::RUN_STATUS_QUEUED);
  run.mutable_spec()->set_command("echo hi");
  *run.mutable_created_at() = ToProtoTime(absl::Now());
  return run;
}

TEST_CASE("people's calls leave the reserved connections to the control plane",
          "[postgres][pool]") {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  PgPool pool(pg.url(), /*size=*/2, /*connect_timeout_seconds=*/3, /*reserved_for_control=*/1);
  absl::Notification first_holds, release_first;
  std::thread first([&] {
    TrafficScope user(TrafficClass::kUser);
    CHECK(pool.Transact("a user's long read",
                        [&](pqxx::work& tx) {
                          tx.exec("SELECT 1");
                          first_holds.Notify();
                          release_first.WaitForNotification();
                          return absl::OkStatus();
                        })
              .ok());
  });
  first_holds.WaitForNotification();
  std::atomic<bool> second_ran{false};
  std::thread second([&] {
    TrafficScope user(TrafficClass::kUser);
    CHECK(pool.Transact("another user's read",
                        [&](pqxx::work& tx) {
                          tx.exec("SELECT 1");
                          second_ran = true;
                          return absl::OkStatus();
                        })
              .ok());
  });
  // The control plane's write gets the reserved connection at once...
  CHECK(pool.Transact("a control write",
                      [](pqxx::work& tx) {
                        tx.exec("SELECT 1");
                        return absl::OkStatus();
                      })
            .ok());
  // ... while the second user call waits for the one connection people may use.
  absl::SleepFor(absl::Milliseconds(300));
  CHECK_FALSE(second_ran);
  release_first.Notify();
  first.join();
  second.join();
  CHECK(second_ran);
}

TEST_CASE("migrations are applied once and recorded", "[postgres][migrations]") {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  REQUIRE(OpenPostgresStores({.url = pg.url()}).ok());
  REQUIRE(OpenPostgresStores({.url = pg.url()}).ok());  // a second start applies nothing

  pqxx::connection c(pg.url());
  pqxx::work tx(c);
  const auto rows = tx.exec("SELECT version, name FROM schema_migrations ORDER BY version");
  REQUIRE(rows.size() == EmbeddedMigrations().size());
  CHECK(rows[0][0].as<int>() == 1);
  CHECK(rows[0][1].as<std::string>() == "initial");
}

TEST_CASE("a database newer than the binary is refused", "[postgres][migrations]") {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  REQUIRE(OpenPostgresStores({.url = pg.url()}).ok());
  {
    pqxx::connection c(pg.url());
    pqxx::work tx(c);
    tx.exec("INSERT INTO schema_migrations (version, name) VALUES (9999, 'from_the_future')");
    tx.commit();
  }
  auto stores = OpenPostgresStores({.url = pg.url()});
  CHECK(absl::IsFailedPrecondition(stores.status()));
  CHECK(stores.status().message().find("9999") != std::string::npos);
}

TEST_CASE("a failing migration leaves the schema as it was", "[postgres][migrations]") {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  PgPool pool(pg.url(), 1, 3);
  std::vector<Migration> migrations = EmbeddedMigrations();
  migrations.push_back({9000, "broken", "CREATE TABLE half_done (x int); SELECT no_such_column;"});
  CHECK_FALSE(ApplyMigrations(pool, migrations).ok());
  pqxx::connection c(pg.url());
  pqxx::work tx(c);
  CHECK(tx.exec("SELECT to_regclass('runs') IS NULL")[0][0].as<bool>());
  CHECK(tx.exec("SELECT to_regclass('half_done') IS NULL")[0][0].as<bool>());
}

TEST_CASE("migration 0008 turns lines stored one per row into chunks read back the same",
          "[postgres][migrations]") {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  PgPool pool(pg.url(), 1, 3);
  std::vector<Migration> before;
  for (const auto& m : EmbeddedMigrations()) {
    if (m.version < 8) before.push_back(m);
  }
  REQUIRE(ApplyMigrations(pool, before).ok());
  {
    // 2,500 lines of rank 0's stdout (three chunks), with a marker of 5 dropped lines standing
    // for 1000..1004, and one line of rank 1's stderr holding bytes that are not text.
    pqxx::connection c(pg.url());
    pqxx::work tx(c);
    tx.exec(
        "INSERT INTO log_lines (run_id, resumption_index, rank, stream, sequence, node_rank,"
        " node_name, time, text, dropped)"
        " SELECT 'r1', 0, 0, 1, g, 0, 'node-a', timestamptz 'epoch' + g * interval '1 second',"
        " convert_to('line ' || g, 'UTF8'), CASE WHEN g = 1004 THEN 5 ELSE 0 END"
        " FROM generate_series(0, 2504) g WHERE g NOT BETWEEN 1000 AND 1003");
    tx.exec(
        "INSERT INTO log_lines VALUES ('r1', 0, 1, 2, 0, 1, 'node-b',"
        " timestamptz 'epoch' + interval '0.000001 second', '\\x00ff0a'::bytea, 0)");
    tx.exec(
        "INSERT INTO log_streams (run_id, resumption_index, rank, stream, node_rank, node_name,"
        " durable_sequence, max_sequence) VALUES ('r1', 0, 0, 1, 0, 'node-a', 2504, 2504),"
        " ('r1', 0, 1, 2, 1, 'node-b', 0, 0)");
    tx.commit();
  }
  auto opened = OpenPostgresStores({.url = pg.url(), .pool_size = 1});
  REQUIRE(opened.ok());
  auto lines = opened->logs->ReadLogs({.run_id = "r1"});
  REQUIRE(lines.ok());
  REQUIRE(lines->size() == 2502);
  CHECK((*lines)[0].text() == "line 0");
  CHECK((*lines)[1].text() == std::string("\0\xff\n", 3));
  CHECK((*lines)[1].rank() == 1);
  CHECK((*lines)[1].node_name() == "node-b");
  CHECK(absl::ToUnixMicros(FromProtoTime((*lines)[1].time())) == 1);
  CHECK((*lines)[1001].sequence() == 1004);
  CHECK((*lines)[1001].dropped_lines() == 5);
  CHECK(absl::ToUnixSeconds(FromProtoTime((*lines)[2501].time())) == 2504);
  CHECK((*lines)[2501].text() == "line 2504");
  pqxx::connection c(pg.url());
  pqxx::work tx(c);
  CHECK(tx.exec("SELECT count(*) FROM log_chunks")[0][0].as<int>() == 4);
  CHECK(tx.exec("SELECT to_regclass('log_lines') IS NULL")[0][0].as<bool>());
}

TEST_CASE("runs written before migration 0019 are found by their metadata once the stores open",
          "[postgres][migrations]") {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  {
    auto stores = OpenPostgresStores({.url = pg.url(), .pool_size = 1});
    REQUIRE(stores.ok());
    // More runs than one batch of the backfill holds, every third with the sought metadata.
    for (int i = 0; i < 450; ++i) {
      v1::Run run = MakeRun("run-" + std::to_string(i));
      (*run.mutable_spec()->mutable_metadata())["sweep"] = i % 3 == 0 ? "lr" : "wd";
      REQUIRE(stores->runs->CreateRun(run, {}).ok());
    }
    pqxx::connection c(pg.url());
    pqxx::work tx(c);
    tx.exec("UPDATE runs SET metadata = NULL");  // as a run written before 0019 has it
    tx.commit();
  }
  auto reopened = OpenPostgresStores({.url = pg.url(), .pool_size = 1});
  REQUIRE(reopened.ok());
  v1::RunFilter filter;
  (*filter.mutable_metadata())["sweep"] = "lr";
  auto found = reopened->runs->ListRuns(filter);
  REQUIRE(found.ok());
  CHECK(found->size() == 150);
  pqxx::connection c(pg.url());
  pqxx::work tx(c);
  CHECK(tx.exec("SELECT count(*) FROM runs WHERE metadata IS NULL")[0][0].as<int>() == 0);
}

TEST_CASE("restarting PostgreSQL mid-test: UNAVAILABLE, then success, nothing lost",
          "[postgres][restart]") {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  metrics::Registry registry;
  auto opened = OpenPostgresStores(
      {.url = pg.url(), .pool_size = 2, .observer = metrics::MakeDbMetrics(registry)});
  REQUIRE(opened.ok());
  Stores s = *opened;
  for (int i = 0; i < 20; ++i)
    REQUIRE(s.runs->CreateRun(MakeRun("before-" + std::to_string(i)), {}).ok());
  v1::NodeEvent event;
  event.set_node_name("n1");
  event.set_type(v1::NODE_EVENT_TYPE_CORDONED);
  REQUIRE(s.node_events->AppendNodeEvent(event).ok());

  // Every transaction is timed, by operation; the database's errors are counted by kind.
  auto value = [&](const std::string& name, const std::vector<std::string>& labels) {
    return testing::MetricValue(registry, name, labels).value_or(0);
  };
  CHECK(value("tessera_db_transaction_seconds", {"creating a run"}) >= 20);
  const double create_failures =
      value("tessera_db_errors_total", {"creating a run", "unavailable"});
  const double list_failures = value("tessera_db_errors_total", {"listing runs", "unavailable"});

  REQUIRE(pg.Stop().ok());
  // Every kind of call fails cleanly while the server is down, without crashing or hanging.
  const absl::Time down_at = absl::Now();
  CHECK(absl::IsUnavailable(s.runs->GetRun("before-0").status()));
  CHECK(absl::IsUnavailable(s.runs->CreateRun(MakeRun("during"), {}).status()));
  CHECK(absl::IsUnavailable(s.runs->ListRuns({}).status()));
  CHECK(absl::IsUnavailable(s.nodes->ListNodes({}).status()));
  CHECK(absl::IsUnavailable(s.node_events->AppendNodeEvent(event).status()));
  CHECK(absl::IsUnavailable(s.api_keys->ListKeys("").status()));
  CHECK(absl::Now() - down_at < absl::Seconds(10));
  CHECK(value("tessera_db_errors_total", {"creating a run", "unavailable"}) == create_failures + 1);
  CHECK(value("tessera_db_errors_total", {"listing runs", "unavailable"}) == list_failures + 1);

  REQUIRE(pg.Resume().ok());
  // The stores reconnect by themselves; the first call after the restart already succeeds.
  auto listed = s.runs->ListRuns({});
  REQUIRE(listed.ok());
  CHECK(listed->size() == 20);
  REQUIRE(s.runs->CreateRun(MakeRun("after"), {}).ok());
  CHECK(s.runs->GetRun("after").ok());
  CHECK(absl::IsNotFound(s.runs->GetRun("during").status()));  // the failed write did not happen
  auto events = s.node_events->ListNodeEvents({});
  REQUIRE(events.ok());
  CHECK(events->size() == 1);
  // The node events sequence continues after the restart.
  auto next = s.node_events->AppendNodeEvent(event);
  REQUIRE(next.ok());
  CHECK(next->id() > (*events)[0].id());
}

TEST_CASE("the change feed survives a PostgreSQL restart: watchers poll meanwhile, then are woken",
          "[postgres][restart]") {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  auto opened = OpenPostgresStores({.url = pg.url()});
  REQUIRE(opened.ok());
  ChangeFeed& feed = *opened->changes;
  SystemClock clock;
  const auto wait_until = [&](const std::function<bool()>& cond) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!cond() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    return cond();
  };
  feed.Generation(ChangeTopic::kNodeEvents);  // starts listening
  REQUIRE(wait_until([&] { return feed.live(); }));

  const uint64_t before = feed.Generation(ChangeTopic::kNodeEvents);
  REQUIRE(pg.Stop().ok());
  // The lost connection is noticed; every watcher is woken (what follows may be missed).
  CHECK(wait_until([&] { return !feed.live(); }));
  CHECK(feed.Generation(ChangeTopic::kNodeEvents) != before);
  // Meanwhile a wait ends at its poll interval.
  const uint64_t down = feed.Generation(ChangeTopic::kNodeEvents);
  const absl::Time start = absl::Now();
  feed.WaitForChange(ChangeTopic::kNodeEvents, down, absl::Milliseconds(300), clock);
  CHECK(absl::Now() - start >= absl::Milliseconds(250));

  REQUIRE(pg.Resume().ok());
  CHECK(wait_until([&] { return feed.live(); }));
  // Listening again: a commit wakes watchers at once.
  const uint64_t back = feed.Generation(ChangeTopic::kNodeEvents);
  v1::NodeEvent event;
  event.set_node_name("n1");
  event.set_type(v1::NODE_EVENT_TYPE_CORDONED);
  REQUIRE(opened->node_events->AppendNodeEvent(event).ok());
  CHECK(wait_until([&] { return feed.Generation(ChangeTopic::kNodeEvents) != back; }));
}

TEST_CASE("restarting PostgreSQL ends the leader's session, the role is taken again after",
          "[postgres][restart]") {
  auto& pg = testing::SharedPostgres();
  REQUIRE(pg.ResetDatabase().ok());
  auto opened = OpenPostgresStores({.url = pg.url()});
  REQUIRE(opened.ok());
  LeaderLockStore& locks = *opened->leader_locks;
  REQUIRE(locks.TryAcquire(kSchedulerLeaderRole, "a")->has_value());
  REQUIRE_FALSE(locks.TryAcquire(kSchedulerLeaderRole, "b")->has_value());

  REQUIRE(pg.Stop().ok());
  const absl::Time down_at = absl::Now();
  CHECK(absl::IsUnavailable(locks.CheckHeld(kSchedulerLeaderRole, "a")));
  CHECK(absl::IsUnavailable(locks.TryAcquire(kSchedulerLeaderRole, "b").status()));
  CHECK(absl::Now() - down_at < absl::Seconds(10));

  REQUIRE(pg.Resume().ok());
  // The former holder is a contender like any other: the first to ask takes the role.
  CHECK(absl::IsFailedPrecondition(locks.CheckHeld(kSchedulerLeaderRole, "a")));
  CHECK(locks.TryAcquire(kSchedulerLeaderRole, "b")->has_value());
  CHECK_FALSE(locks.TryAcquire(kSchedulerLeaderRole, "a")->has_value());
}

}  // namespace store_postgres_faults_test
}  // namespace tessera::store
