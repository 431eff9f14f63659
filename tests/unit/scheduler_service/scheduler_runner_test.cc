// The leader's runner: one instance of several leads and runs the cycle; a standby takes over on
// the next beat once the leader is gone. A fake clock decides every beat.
#include "scheduler/service/scheduler_runner.h"

#include <catch2/catch.hpp>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "scheduler/service/scheduler.h"
#include "services/store/memory/memory_database.h"
#include "tests/unit/scheduler_service/fake_scheduler_clients.h"

namespace tessera::scheduler {
namespace scheduler_runner_test {

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<store::MemoryDatabase> db = std::make_shared<store::MemoryDatabase>();
  store::Stores stores = store::MakeMemoryStores(db);
  std::shared_ptr<ListedRuns> runs = std::make_shared<ListedRuns>();
  Scheduler scheduler = MakeScheduler(stores.nodes, runs, std::make_shared<WorkerRegistry>(),
                                      std::make_shared<IdempotentCalls>(stores.idempotency, clock),
                                      clock, SchedulerConfig{});

  std::unique_ptr<SchedulerRunner> Runner(const std::string& instance,
                                          std::shared_ptr<store::LeaderLockStore> locks,
                                          absl::Duration interval = absl::Milliseconds(200),
                                          std::shared_ptr<const LeaseTable> leases = nullptr) {
    return std::make_unique<SchedulerRunner>(
        scheduler.cycle,
        std::make_shared<LeaderElection>(std::move(locks), std::string(store::kSchedulerLeaderRole),
                                         instance, clock),
        clock, interval, std::move(leases));
  }
  // Admits one PENDING run per cycle that runs, so cycles can be counted by what they admitted.
  void AddPending(const std::string& id) {
    v1::Run r;
    r.set_id(id);
    r.set_status(v1::RUN_STATUS_PENDING);
    runs->runs.push_back(r);
  }
};

// Holds every call from a thread other than the one that built it until Open(): the runner's own
// thread waits here, so only what the constructor asked has been answered.
class GateForOtherThreads final : public store::LeaderLockStore {
 public:
  explicit GateForOtherThreads(std::shared_ptr<store::LeaderLockStore> inner)
      : inner_(std::move(inner)) {}
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  absl::StatusOr<std::optional<int64_t>> TryAcquire(std::string_view role,
                                                    std::string_view instance) override {
    Pass();
    return inner_->TryAcquire(role, instance);
  }
  absl::Status CheckHeld(std::string_view role, std::string_view instance) override {
    Pass();
    return inner_->CheckHeld(role, instance);
  }
  absl::Status Release(std::string_view role, std::string_view instance) override {
    Pass();
    return inner_->Release(role, instance);
  }

 private:
  void Pass() {
    if (std::this_thread::get_id() == builder_) return;
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&open_));
  }
  const std::shared_ptr<store::LeaderLockStore> inner_;
  const std::thread::id builder_ = std::this_thread::get_id();
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

TEST_CASE(
    "scheduler runner: the first beat is taken before it is built, so a server leads before "
    "it serves") {
  Fixture f;
  auto gate = std::make_shared<GateForOtherThreads>(f.stores.leader_locks);
  auto a = f.Runner("a", gate);
  // Its thread has asked nothing yet (it waits at the gate): the constructor took the role.
  // Built without it, a sole server refused its first workers as a standby.
  CHECK(a->is_leader());
  gate->Open();
  REQUIRE(f.clock->AwaitWaiters(1));
  CHECK(a->is_leader());
}

TEST_CASE("scheduler runner: one instance leads and runs the cycle at once, a standby does not") {
  Fixture f;
  f.AddPending("r1");
  auto a = f.Runner("a", f.stores.leader_locks);
  REQUIRE(f.clock->AwaitWaiters(1));  // its first beat is over
  CHECK(a->is_leader());
  REQUIRE(f.runs->recorded.size() == 1);  // the cycle ran: it admitted r1
  CHECK(f.runs->recorded[0].status() == v1::RUN_STATUS_QUEUED);

  auto b = f.Runner("b", f.stores.leader_locks);
  REQUIRE(f.clock->AwaitWaiters(2));
  CHECK_FALSE(b->is_leader());

  // The leader goes (and gives the lock up): the standby leads on its next beat.
  a.reset();
  REQUIRE(f.clock->AwaitWaiters(1));
  CHECK_FALSE(b->is_leader());
  f.clock->Advance(absl::Milliseconds(200));
  REQUIRE(f.clock->AwaitWaiters(1));
  CHECK(b->is_leader());
}

TEST_CASE("scheduler runner: without a lock store the single instance always leads") {
  Fixture f;
  auto only = f.Runner("only", nullptr);
  REQUIRE(f.clock->AwaitWaiters(1));
  CHECK(only->is_leader());
}

TEST_CASE("scheduler runner: a leader frozen past its deadline steps down, the standby leads") {
  Fixture f;
  auto a = f.Runner("a", f.stores.leader_locks);
  REQUIRE(f.clock->AwaitWaiters(1));
  REQUIRE(a->is_leader());
  auto b = f.Runner("b", f.stores.leader_locks);
  REQUIRE(f.clock->AwaitWaiters(2));
  REQUIRE_FALSE(b->is_leader());

  // "a" is frozen: the database ends its idle session, and time passes without its beats.
  f.db->EndLeaderSession(store::kSchedulerLeaderRole, "a");
  f.clock->Advance(absl::Seconds(5));
  // Whatever its threads ask now, it no longer leads (new worker streams are refused).
  CHECK_FALSE(a->is_leader());
  REQUIRE(f.clock->AwaitWaiters(2));
  CHECK(b->is_leader());
  CHECK_FALSE(a->is_leader());
}

TEST_CASE("scheduler runner: a dead node is declared lost at its lease's end, not a beat later") {
  // A beat of 10 s, so that only the lease's end can bring the cycle forward.
  const absl::Duration lease = SchedulerConfig{}.lease;
  for (const bool with_leases : {true, false}) {
    Fixture f;
    const absl::Time start = f.clock->Now();
    v1::Node node;
    node.set_name("n1");
    node.set_cluster("local");
    node.set_liveness(v1::NODE_LIVENESS_ONLINE);
    REQUIRE(f.stores.nodes->CreateNode(node).ok());
    auto only =
        f.Runner("only", nullptr, absl::Seconds(10), with_leases ? f.scheduler.leases : nullptr);
    REQUIRE(f.clock->AwaitWaiters(1));  // the first cycle adopted n1: its lease ends then
    f.clock->Advance(lease);
    REQUIRE(f.clock->AwaitWaiters(1));
    INFO("runner told of the leases: " << with_leases);
    const auto n1 = f.stores.nodes->GetNode("n1");
    REQUIRE(n1.ok());
    CHECK(n1->liveness() == (with_leases ? v1::NODE_LIVENESS_LOST : v1::NODE_LIVENESS_ONLINE));
    CHECK(f.clock->Now() == start + lease);
  }
}

}  // namespace scheduler_runner_test
}  // namespace tessera::scheduler
