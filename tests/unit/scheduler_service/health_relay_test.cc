// The scheduler's health relay alone: reports go on to the health API under the stream's node
// name, and when the health API cannot take a fatal fault or a hang, the attempt ends here.
#include "scheduler/service/health_relay.h"

#include <catch2/catch.hpp>

#include "services/store/memory/memory_database.h"
#include "tests/unit/scheduler_service/fake_scheduler_clients.h"

namespace tessera::scheduler {
namespace health_relay_test {

const auth::Principal kSystem{"tessera", v1::ROLE_SYSTEM};
const auth::Principal kAdmin{"root", v1::ROLE_ADMIN};

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<ListedRuns> runs = std::make_shared<ListedRuns>();
  std::shared_ptr<RecordingHealth> health = std::make_shared<RecordingHealth>();
  std::shared_ptr<WorkerRegistry> workers = std::make_shared<WorkerRegistry>();
  std::shared_ptr<AttemptTracker> attempts =
      std::make_shared<AttemptTracker>(clock, absl::Seconds(13));
  std::shared_ptr<AttemptControl> control =
      std::make_shared<AttemptControl>(attempts, runs, workers, SchedulerConfig{});
  std::vector<std::pair<std::string, v1::ControlMessage>> sent;

  HealthRelay Relay(bool with_health = true) {
    return HealthRelay(with_health ? health : nullptr, workers, attempts, control,
                       std::make_shared<IdempotentCalls>(stores.idempotency, clock));
  }
  v1::Run Running(const std::string& id, std::vector<std::string> nodes) {
    v1::Run r;
    r.set_id(id);
    r.set_name("run-" + id);
    r.set_status(v1::RUN_STATUS_RUNNING);
    for (const auto& n : nodes) {
      r.add_nodes()->set_node_name(n);
      workers->Attach(n, [this, n](const v1::ControlMessage& m) {
        sent.emplace_back(n, m);
        return true;
      });
    }
    runs->runs.push_back(r);
    attempts->LearnActive({r});
    return r;
  }
};

TEST_CASE("health relay: reports carry the stream's node, whatever the message says") {
  Fixture f;
  HealthRelay relay = f.Relay();
  v1::HealthCheckResult result;
  result.set_node_name("impostor");
  REQUIRE(relay.OnHealthResult("n1", result).ok());
  REQUIRE(f.health->results.size() == 1);
  CHECK(f.health->results[0].node_name() == "n1");
  v1::GpuFault fault;
  fault.set_node_name("impostor");
  fault.set_kind(v1::GPU_FAULT_KIND_THERMAL_THROTTLE);
  REQUIRE(relay.OnGpuFault("n1", fault).ok());
  CHECK(f.health->faults.at(0).node_name() == "n1");
  CHECK(f.runs->recorded.empty());  // the health API decides
}

TEST_CASE("health relay: a fatal fault the health API cannot take ends the node's attempts") {
  Fixture f;
  f.health->answer = absl::UnavailableError("health API down");
  HealthRelay relay = f.Relay();
  f.Running("r1", {"n1", "n2"});
  f.Running("r2", {"n3"});
  v1::GpuFault throttled;
  throttled.set_kind(v1::GPU_FAULT_KIND_THERMAL_THROTTLE);
  CHECK(absl::IsUnavailable(relay.OnGpuFault("n1", throttled)));
  CHECK(f.runs->recorded.empty());  // not fatal: nothing ends

  v1::GpuFault fell_off;
  fell_off.set_kind(v1::GPU_FAULT_KIND_FELL_OFF_BUS);
  REQUIRE(relay.OnGpuFault("n1", fell_off).ok());
  REQUIRE(f.runs->recorded.size() == 1);
  CHECK(f.runs->recorded[0].run_id() == "r1");
  CHECK(f.runs->recorded[0].end_reason() == v1::ATTEMPT_END_REASON_GPU_FAULT);
  CHECK(f.runs->recorded[0].detection_method() == v1::DETECTION_METHOD_GPU_PROBE);
  CHECK(f.runs->recorded[0].first_failed_node() == "n1");
  // Both of the run's nodes were told to stop; the other run's node was not.
  CHECK(f.sent.size() == 2);
  for (const auto& [node, msg] : f.sent) {
    CHECK(node != "n3");
    CHECK(msg.has_stop_attempt());
  }
}

TEST_CASE("health relay: a hang the health API cannot take ends the attempt, blaming the rank") {
  Fixture f;
  HealthRelay without = f.Relay(/*with_health=*/false);
  f.Running("r1", {"n1"});
  v1::RankHang hang;
  hang.set_run_id("r1");
  hang.set_rank(3);
  hang.set_last_step(41);
  hang.set_seconds_without_progress(90);
  REQUIRE(without.OnRankHang("n1", hang).ok());
  REQUIRE(f.runs->recorded.size() == 1);
  CHECK(f.runs->recorded[0].end_reason() == v1::ATTEMPT_END_REASON_HANG);
  CHECK(f.runs->recorded[0].first_failed_rank() == 3);
  CHECK(f.runs->recorded[0].first_failed_node() == "n1");
  // Ended: a second report of the same hang changes nothing.
  REQUIRE(without.OnRankHang("n1", hang).ok());
  CHECK(f.runs->recorded.size() == 1);

  HealthRelay with = f.Relay();
  hang.set_run_id("r2");
  REQUIRE(with.OnRankHang("n1", hang).ok());
  REQUIRE(f.health->hangs.size() == 1);
  CHECK(f.health->hangs[0].idempotency_key() == "hang/r2/0/3");
  CHECK(f.health->hangs[0].node_name() == "n1");
}

TEST_CASE("health relay: a node's hang report of an attempt placed elsewhere changes nothing") {
  Fixture f;
  f.Running("victim", {"n2"});
  v1::RankHang hang;
  hang.set_run_id("victim");
  hang.set_rank(0);
  hang.set_seconds_without_progress(600);
  for (bool with_health : {false, true}) {
    INFO(with_health);
    HealthRelay relay = f.Relay(with_health);
    const absl::Status st = relay.OnRankHang("n1", hang);
    CHECK(absl::IsPermissionDenied(st));
    CHECK(st.message() ==
          "n1 reported a hang of rank 0 of run run-victim (attempt 0), which is not placed on it: "
          "ignored");
  }
  // Nothing reached the health API, nothing ended, no node was told to stop.
  CHECK(f.health->hangs.empty());
  CHECK(f.runs->recorded.empty());
  CHECK(f.sent.empty());
  // Its own node's report is taken.
  REQUIRE(f.Relay().OnRankHang("n2", hang).ok());
  CHECK(f.health->hangs.size() == 1);
}

TEST_CASE("health relay: evictions are the system's, need a reason, and are idempotent by key") {
  Fixture f;
  HealthRelay relay = f.Relay();
  f.Running("r1", {"n1"});
  v1::EvictNodeRequest req;
  req.set_node_name("n1");
  req.set_idempotency_key("evict-1");
  v1::EvictNodeResponse resp;
  CHECK(absl::IsPermissionDenied(relay.EvictNode(kAdmin, req, &resp)));
  CHECK(absl::IsInvalidArgument(relay.EvictNode(kSystem, req, &resp)));
  req.set_reason(v1::ATTEMPT_END_REASON_STRAGGLER);
  REQUIRE(relay.EvictNode(kSystem, req, &resp).ok());
  REQUIRE(resp.run_names_size() == 1);
  CHECK(resp.run_names(0) == "run-r1");
  CHECK(f.runs->recorded.size() == 1);
  // A retry with the key gets the same answer and ends nothing twice.
  v1::EvictNodeResponse again;
  REQUIRE(relay.EvictNode(kSystem, req, &again).ok());
  CHECK(again.run_names_size() == 1);
  CHECK(f.runs->recorded.size() == 1);
}

TEST_CASE("health relay: commands reach only connected workers, and need a command") {
  Fixture f;
  HealthRelay relay = f.Relay();
  v1::DispatchToWorkerRequest req;
  v1::DispatchToWorkerResponse resp;
  req.set_node_name("n1");
  CHECK(absl::IsInvalidArgument(relay.DispatchToWorker(kSystem, req, &resp)));
  req.mutable_start_canary();
  CHECK(absl::IsPermissionDenied(relay.DispatchToWorker(kAdmin, req, &resp)));
  CHECK(absl::IsUnavailable(relay.DispatchToWorker(kSystem, req, &resp)));
}

}  // namespace health_relay_test
}  // namespace tessera::scheduler
