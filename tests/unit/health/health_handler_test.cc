// The health API's handler against fakes of the scheduler, cordon service and run manager, with
// a fake clock: sweeps through their stages, remediation, GPU faults, hangs, fault injection, the
// run watch and the way back into service.
#include "healthcheck/health_handler.h"

#include <catch2/catch.hpp>
#include <set>

#include "absl/strings/match.h"
#include "tests/support/metric_values.h"
#include "tests/unit/health/handler_fixture.h"

namespace tessera::health {
namespace health_handler_test {
using namespace handler_test;  // NOLINT: the fixture is this test's vocabulary
TEST_CASE("a sweep runs compute stress, then all-reduce rounds, and passes healthy nodes") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  const v1::Sweep started = f.Start();
  CHECK(started.state() == v1::SWEEP_STATE_RUNNING);
  CHECK(started.node_names_size() == 4);
  CHECK(started.expected_results() == 4 + 8);
  CHECK(started.trigger() == v1::SWEEP_TRIGGER_ON_DEMAND);
  CHECK(f.scheduler->dispatched.empty());  // RPCs never dispatch: the tick does

  f.health.Tick();
  CHECK(f.scheduler->dispatched.size() == 4);  // four machines: one compute round
  CHECK(f.Sweep(started.id()).phase() == 1);
  f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  f.health.Tick();
  CHECK(f.scheduler->dispatched.size() == 4);  // two pairs at once, each node in one
  for (const auto& d : f.scheduler->dispatched) {
    CHECK(d.start_canary().kind() == v1::HEALTH_CHECK_KIND_ALLREDUCE);
  }
  CHECK(f.Sweep(started.id()).phase() == 2);
  const v1::Sweep done = f.RunToEnd(started.id());
  CHECK(done.state() == v1::SWEEP_STATE_FINISHED);
  CHECK(done.anomalous_nodes().empty());
  CHECK(f.cordon->cordoned.empty());
  v1::GetSweepResponse got;
  REQUIRE(f.handler
              ->GetSweep(
                  kUser,
                  [&] {
                    v1::GetSweepRequest r;
                    r.set_id(started.id());
                    return r;
                  }(),
                  &got)
              .ok());
  CHECK(got.results_size() == 12);
}

TEST_CASE("compute stress tests carry the configured length and CPU threads") {
  HealthConfig config;
  config.canary.compute_seconds = 0.25;
  config.canary.compute_threads = 1;
  Fixture f(config);
  for (const auto& n : {"a", "b", "c"}) f.scheduler->Add(n);
  f.Start();
  f.health.Tick();
  const auto compute = f.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  REQUIRE(compute.size() == 3);
  for (const auto& d : compute) {
    CHECK(d.start_canary().seconds() == 0.25);
    CHECK(d.start_canary().threads() == 1);
  }
  Fixture all_cores;  // the default: the node's every core
  all_cores.scheduler->Add("a");
  all_cores.Start();
  all_cores.health.Tick();
  const auto one = all_cores.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  REQUIRE(one.size() == 1);
  CHECK(one[0].start_canary().threads() == 0);
}

TEST_CASE("a slow node is cordoned with the evidence and its runs evicted as stragglers") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d", "e"}) f.scheduler->Add(n);
  f.scheduler->runs_on["c"] = {"gpt-1"};
  const v1::Sweep s = f.Start();
  const v1::Sweep done = f.RunToEnd(s.id(), {{"c", 0.4}});
  REQUIRE(done.anomalous_nodes_size() == 1);
  CHECK(done.anomalous_nodes(0) == "c");
  REQUIRE(f.cordon->cordoned.size() == 1);
  CHECK(f.cordon->cordoned[0].first == "c");
  // Under half speed on its first figures, it is a suspect all the same: the pairs measured
  // between peers condemn it, in the same sweep (slower than half its peers there).
  CHECK(f.cordon->cordoned[0].second.find("health: sweep " + s.id() +
                                          ": c: slow: 0.400 x its peers' compute rate over ") == 0);
  const auto& e = f.cordon->evidence[0].fields();
  CHECK(e.at("verdict").string_value() == "HEALTH_VERDICT_SLOW");
  CHECK(e.at("confirm_mean_ratio").number_value() == Approx(0.4));
  CHECK(e.at("confirm_1_tflops").number_value() == Approx(0.4));
  CHECK(e.at("confirm_1_peer_tflops").number_value() == Approx(1.0));
  REQUIRE(f.scheduler->evicted.size() == 1);
  CHECK(f.scheduler->evicted[0].reason() == v1::ATTEMPT_END_REASON_STRAGGLER);
  CHECK(f.scheduler->evicted[0].detection_method() == v1::DETECTION_METHOD_CANARY_SWEEP);
  // What Prometheus sees: one sweep on demand, one node condemned as slow.
  CHECK(tessera::testing::MetricValue(f.registry, "tessera_health_sweeps_total", {"ON_DEMAND"}) ==
        1);
  CHECK(tessera::testing::MetricValue(f.registry, "tessera_health_nodes_condemned_total",
                                      {"SLOW"}) == 1);
  CHECK(tessera::testing::MetricValue(f.registry, "tessera_health_last_sweep_condemned_nodes") ==
        1);
}

TEST_CASE("what does not answer before the deadline times out and is taken out") {
  Fixture f;
  for (const auto& n : {"a", "b", "c"}) f.scheduler->Add(n);
  const v1::Sweep s = f.Start();
  f.health.Tick();
  f.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);  // handed over, never answered
  f.clock->Advance(absl::Seconds(66));                      // past the compute deadline
  f.health.Tick();
  // Taken out at the end of the compute stage, while the all-reduce rounds go on.
  const v1::Sweep after = f.Sweep(s.id());
  CHECK(after.anomalous_nodes_size() == 3);
  CHECK(after.findings(0) ==
        "a: compute stress HEALTH_VERDICT_TIMEOUT: no result before the sweep's deadline");
  REQUIRE(f.scheduler->evicted.size() == 3);
  CHECK(f.scheduler->evicted.at(0).reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
}

TEST_CASE("a worker that cannot start the canary fails the check at once") {
  Fixture f;
  for (const auto& n : {"a", "b"}) f.scheduler->Add(n);
  f.scheduler->refused.insert("b");
  const v1::Sweep s = f.Start();
  f.health.Tick();
  f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);  // a answers; b's was refused
  f.health.Tick();
  // b's compute failed to start: its result is an ERROR, so the stage is complete.
  auto pair = f.scheduler->Take(v1::HEALTH_CHECK_KIND_ALLREDUCE);
  CHECK(pair.size() == 1);              // a's half; b's could not start either
  f.clock->Advance(absl::Seconds(66));  // past the all-reduce deadline: a's half never answered
  f.health.Tick();
  const v1::Sweep done = f.Sweep(s.id());
  CHECK(done.state() == v1::SWEEP_STATE_FINISHED);
  REQUIRE(done.anomalous_nodes_size() == 1);
  CHECK(done.anomalous_nodes(0) == "b");
  CHECK(done.findings(0).find("could not start: tessera-canary") != std::string::npos);
  CHECK(f.scheduler->evicted.at(0).reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
}

TEST_CASE("nodes of one machine take turns at the compute stress test") {
  Fixture f;
  for (const auto& n : {"a", "b", "c"}) f.scheduler->Add(n, "127.0.0.1");
  const v1::Sweep s = f.Start();
  for (int round = 1; round <= 3; ++round) {
    f.health.Tick();
    CHECK(f.Sweep(s.id()).phase() == round);
    CHECK(f.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS).size() == 1);
    v1::ReportHealthResultRequest req;
    req.mutable_result()->set_sweep_id(s.id());
    req.mutable_result()->set_node_name(std::string(1, static_cast<char>('a' + round - 1)));
    req.mutable_result()->set_kind(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
    req.mutable_result()->set_verdict(v1::HEALTH_VERDICT_PASSED);
    req.mutable_result()->set_compute_tflops(1);
    v1::ReportHealthResultResponse resp;
    REQUIRE(f.handler->ReportHealthResult(kSystem, req, &resp).ok());
  }
}

TEST_CASE("sweep requests are checked: admins only, known online nodes") {
  Fixture f;
  f.scheduler->Add("a");
  f.scheduler->Add("gone").set_liveness(v1::NODE_LIVENESS_LOST);
  v1::StartSweepRequest req;
  v1::StartSweepResponse resp;
  CHECK(f.handler->StartSweep(kUser, req, &resp).code() == absl::StatusCode::kPermissionDenied);
  req.add_node_names("nope");
  CHECK(f.handler->StartSweep(kAdmin, req, &resp).message() == "node_names: no node named nope");
  req.set_node_names(0, "gone");
  CHECK(f.handler->StartSweep(kAdmin, req, &resp).message() ==
        "node_names: node gone is NODE_LIVENESS_LOST, not online");
  f.scheduler->nodes["a"].set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  f.scheduler->nodes["a"].set_status_reason("operator: disk");
  CHECK(f.handler->StartSweep(kAdmin, v1::StartSweepRequest{}, &resp).code() ==
        absl::StatusCode::kFailedPrecondition);  // nothing ready: a is an operator's cordon
}

TEST_CASE("a fatal GPU fault cordons and evicts at once, a throttle is only recorded") {
  Fixture f;
  f.scheduler->Add("g1");
  f.scheduler->runs_on["g1"] = {"gpt-2"};
  v1::ReportGpuFaultRequest req;
  auto* fault = req.mutable_fault();
  fault->set_node_name("g1");
  fault->set_gpu_index(3);
  fault->set_kind(v1::GPU_FAULT_KIND_THERMAL_THROTTLE);
  fault->set_detail("clocks throttled");
  v1::ReportGpuFaultResponse resp;
  REQUIRE(f.handler->ReportGpuFault(kSystem, req, &resp).ok());
  CHECK(f.cordon->cordoned.empty());
  fault->set_kind(v1::GPU_FAULT_KIND_XID);
  fault->set_xid(79);
  fault->set_detail("XID 79 (GPU has fallen off the bus), injected");
  fault->set_injected(true);
  REQUIRE(f.handler->ReportGpuFault(kSystem, req, &resp).ok());
  REQUIRE(f.cordon->cordoned.size() == 1);
  CHECK(f.cordon->cordoned[0].second ==
        "health: GPU 3: XID 79 (GPU has fallen off the bus), injected");
  CHECK(f.cordon->evidence[0].fields().at("xid").number_value() == 79);
  CHECK(f.scheduler->evicted.at(0).reason() == v1::ATTEMPT_END_REASON_GPU_FAULT);
  CHECK(f.scheduler->evicted.at(0).detection_method() == v1::DETECTION_METHOD_GPU_PROBE);
  v1::ListHealthResultsRequest list;
  list.add_node_names("g1");
  v1::ListHealthResultsResponse results;
  REQUIRE(f.handler->ListHealthResults(kUser, list, &results).ok());
  CHECK(results.results_size() == 2);
  CHECK(results.results(0).verdict() == v1::HEALTH_VERDICT_GPU_FAULT);
  CHECK(f.handler->ReportGpuFault(kUser, req, &resp).code() == absl::StatusCode::kPermissionDenied);
}

TEST_CASE("a hang requeues its run only, its node is cordoned only if a sweep finds it at fault") {
  Fixture f;
  for (const auto& n : {"h1", "h2", "h3", "h4"}) f.scheduler->Add(n);
  v1::Run other;
  other.set_name("someone-elses");
  other.add_nodes()->set_node_name("h3");
  f.runs->running = {other};
  v1::ReportRankHangRequest req;
  req.set_run_id("run-9");
  req.set_resumption_index(2);
  req.set_rank(5);
  req.set_node_name("h2");
  req.set_last_step(41);
  req.set_seconds_without_progress(12.5);
  req.set_in_collective(true);
  v1::ReportRankHangResponse resp;
  REQUIRE(f.handler->ReportRankHang(kSystem, req, &resp).ok());
  CHECK(f.cordon->cordoned.empty());
  REQUIRE(f.scheduler->evicted.size() == 1);
  CHECK(f.scheduler->evicted[0].run_id() == "run-9");  // only that run
  CHECK(f.scheduler->evicted[0].reason() == v1::ATTEMPT_END_REASON_HANG);
  v1::ListSweepsResponse sweeps;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &sweeps).ok());
  CHECK(sweeps.sweeps_size() == 0);  // waiting in a collective blames no node

  // A rank that stopped on its own: its run is requeued, its node only checked. A run's own
  // signal (which its command controls) cordons nothing and evicts no other tenant.
  req.set_in_collective(false);
  REQUIRE(f.handler->ReportRankHang(kSystem, req, &resp).ok());
  CHECK(f.cordon->cordoned.empty());
  REQUIRE(f.scheduler->evicted.size() == 2);
  CHECK(f.scheduler->evicted[1].run_id() == "run-9");
  CHECK(f.scheduler->evicted[1].detection_method() == v1::DETECTION_METHOD_HANG_TIMEOUT);
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &sweeps).ok());
  REQUIRE(sweeps.sweeps_size() == 1);
  const v1::Sweep s = sweeps.sweeps(0);
  CHECK(s.trigger() == v1::SWEEP_TRIGGER_HANG);
  CHECK(s.suspect_node() == "h2");
  CHECK(s.trigger_detail() ==
        "rank 5 of run run-9 (attempt 2) on h2 made no progress for 12.5 s (last step 41)");
  // Measured beside idle peers (h3 runs another run: left alone).
  CHECK(std::set<std::string>(s.node_names().begin(), s.node_names().end()) ==
        std::set<std::string>{"h1", "h2", "h4"});

  SECTION("a node that passes stays in service") {
    const v1::Sweep done = f.RunToEnd(s.id());
    CHECK(done.anomalous_nodes_size() == 0);
    CHECK(f.cordon->cordoned.empty());
    CHECK(f.scheduler->evicted.size() == 2);
  }
  SECTION("a node the sweep finds at fault is cordoned, with the hang in its evidence") {
    const v1::Sweep done = f.RunToEnd(s.id(), {{"h2", 0.3}});
    REQUIRE(done.anomalous_nodes_size() == 1);
    REQUIRE(f.cordon->cordoned.size() == 1);
    CHECK(f.cordon->cordoned[0].first == "h2");
    CHECK(f.cordon->evidence[0].fields().at("trigger_detail").string_value() == s.trigger_detail());
  }
}

TEST_CASE("fault injection: admins only, on nodes that allow it, carried to the worker") {
  Fixture f;
  f.scheduler->Add("x");
  f.scheduler->Add("y").set_fault_injection_allowed(true);
  v1::InjectFaultRequest req;
  req.set_node_name("x");
  req.set_kind(v1::FAULT_KIND_SLOW);
  req.set_factor(0.3);
  v1::InjectFaultResponse resp;
  CHECK(f.handler->InjectFault(kUser, req, &resp).code() == absl::StatusCode::kPermissionDenied);
  CHECK(f.handler->InjectFault(kAdmin, req, &resp).code() == absl::StatusCode::kFailedPrecondition);
  req.set_node_name("y");
  REQUIRE(f.handler->InjectFault(kAdmin, req, &resp).ok());
  REQUIRE(f.scheduler->dispatched.size() == 1);
  CHECK(f.scheduler->dispatched[0].inject_fault().kind() == v1::FAULT_KIND_SLOW);
  CHECK(f.scheduler->dispatched[0].inject_fault().factor() == 0.3);
  req.set_kind(v1::FAULT_KIND_UNSPECIFIED);
  CHECK(f.handler->InjectFault(kAdmin, req, &resp).code() == absl::StatusCode::kInvalidArgument);
  req.set_node_name("z");
  req.set_kind(v1::FAULT_KIND_HANG);
  CHECK(f.handler->InjectFault(kAdmin, req, &resp).code() == absl::StatusCode::kNotFound);
}

TEST_CASE("a run's MFU drop sweeps its nodes with idle peers, then the slow node is taken out") {
  HealthConfig config;
  config.triggers.watch.mfu_reports = 2;
  Fixture f(config);
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  f.scheduler->runs_on["b"] = {"gpt-3"};
  v1::Run run;
  run.set_id("run-3");
  run.set_name("gpt-3");
  run.mutable_spec()->mutable_scheduling()->set_mfu_threshold(0.05);
  run.add_nodes()->set_node_name("a");
  run.add_nodes()->set_node_name("b");
  for (int report = 1; report <= 2; ++report) {
    run.mutable_progress()->set_mfu(0.02);
    run.mutable_progress()->mutable_reported_at()->set_seconds(report);
    f.runs->running = {run};
    f.health.Tick();
    f.clock->Advance(absl::Seconds(1));
  }
  v1::ListSweepsResponse sweeps;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &sweeps).ok());
  REQUIRE(sweeps.sweeps_size() == 1);
  const v1::Sweep s = sweeps.sweeps(0);
  CHECK(s.trigger() == v1::SWEEP_TRIGGER_MFU_DROP);
  CHECK(s.run_name() == "gpt-3");
  CHECK(s.node_names_size() == 4);  // the run's two and the two idle peers
  const v1::Sweep done = f.RunToEnd(s.id(), {{"b", 0.3}});
  REQUIRE(done.anomalous_nodes_size() == 1);
  CHECK(done.anomalous_nodes(0) == "b");
  CHECK(f.scheduler->evicted.at(0).detection_method() == v1::DETECTION_METHOD_MFU_DROP);
  CHECK(f.scheduler->evicted.at(0).reason() == v1::ATTEMPT_END_REASON_STRAGGLER);
}

TEST_CASE("a node the health API cordoned returns after N passing sweeps, an operator's does not") {
  HealthConfig config;
  config.uncordon_after_passes = 2;
  Fixture f(config);
  for (const auto& n : {"a", "b", "c"}) f.scheduler->Add(n);
  f.RunToEnd(f.Start().id(), {{"c", 0.2}});
  REQUIRE(f.scheduler->nodes["c"].admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  f.scheduler->nodes["a"].set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  f.scheduler->nodes["a"].set_status_reason("operator: cable");
  f.RunToEnd(f.Start({"a", "b", "c"}).id());
  CHECK(f.cordon->uncordoned.empty());  // one pass so far
  f.RunToEnd(f.Start({"a", "b", "c"}).id());
  REQUIRE(f.cordon->uncordoned.size() == 1);
  CHECK(f.cordon->uncordoned[0].first == "c");
  CHECK(f.cordon->uncordoned[0].second == "health: passed 2 sweeps in a row");
  CHECK(f.scheduler->nodes["a"].admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
}

TEST_CASE(
    "a verdict on a node another tenant's run shared is deferred: drained, then judged idle") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d", "e"}) f.scheduler->Add(n);
  // Mallory's run shares c: it could take every core, or hold the canary's port, during the
  // sweep; evicting everyone on c for that is what she must not be able to cause.
  v1::Run hog;
  hog.set_name("hog");
  hog.set_user("mallory");
  hog.add_nodes()->set_node_name("c");
  f.runs->running = {hog};
  const v1::Sweep s = f.Start();
  const v1::Sweep done = f.RunToEnd(s.id(), {{"c", 0.4}});
  CHECK(done.anomalous_nodes_size() == 0);
  CHECK(f.cordon->cordoned.empty());
  CHECK(f.scheduler->evicted.empty());
  REQUIRE(f.cordon->drained.size() == 1);
  CHECK(f.cordon->drained[0].first == "c");
  // The node's reason, which every user reads, names no run; the sweep, operators', does.
  CHECK(absl::StrContains(f.cordon->drained[0].second,
                          "measured while another tenant's run ran on it: drained until it is "
                          "measured idle"));
  CHECK_FALSE(absl::StrContains(f.cordon->drained[0].second, "hog"));
  CHECK_FALSE(absl::StrContains(f.cordon->drained[0].second, "mallory"));
  REQUIRE(done.findings_size() == 1);
  CHECK(absl::StartsWith(done.findings(0), "deferred: c: slow: 0.400 x its peers"));
  CHECK(absl::StrContains(done.findings(0), "measured while hog (mallory) ran on it"));
  CHECK(tessera::testing::MetricValue(f.registry, "tessera_health_verdicts_deferred_total",
                                      {"SLOW"}) == 1);
  CHECK(f.scheduler->nodes["c"].admin_state() == v1::NODE_ADMIN_STATE_DRAINING);

  const auto sweeps = [&] {
    v1::ListSweepsResponse listed;
    REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &listed).ok());
    return listed;
  };
  // Not measured again while her run is there (each tick one interval on: each looks).
  const absl::Duration interval = HealthConfig{}.triggers.remeasure_interval;
  for (int i = 0; i < 3; ++i) {
    f.clock->Advance(interval);
    f.health.Tick();
  }
  CHECK(sweeps().sweeps_size() == 1);
  // Once it is idle: a sweep of c with idle peers.
  f.runs->running.clear();
  f.clock->Advance(interval);
  f.health.Tick();
  const v1::ListSweepsResponse after = sweeps();
  REQUIRE(after.sweeps_size() == 2);
  const v1::Sweep again = after.sweeps(0).id() == s.id() ? after.sweeps(1) : after.sweeps(0);
  CHECK(again.suspect_node() == "c");
  CHECK(absl::StrContains(again.trigger_detail(), "measuring c again now that it is idle"));
  CHECK(std::set<std::string>(again.node_names().begin(), again.node_names().end()) ==
        std::set<std::string>{"a", "b", "c", "d", "e"});

  SECTION("it passes on its own: back in service") {
    f.RunToEnd(again.id());
    REQUIRE(f.cordon->uncordoned.size() == 1);
    CHECK(f.cordon->uncordoned[0].first == "c");
    CHECK(f.cordon->uncordoned[0].second ==
          "health: sweep " + again.id() + " measured it idle and it passed");
    CHECK(f.cordon->cordoned.empty());
  }
  SECTION("it is slow on its own: taken out") {
    const v1::Sweep judged = f.RunToEnd(again.id(), {{"c", 0.4}});
    REQUIRE(judged.anomalous_nodes_size() == 1);
    CHECK(judged.anomalous_nodes(0) == "c");
    REQUIRE(f.cordon->cordoned.size() == 1);
    CHECK(f.cordon->cordoned[0].first == "c");
    CHECK(f.scheduler->nodes["c"].admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
    CHECK(f.cordon->uncordoned.empty());
  }
}

TEST_CASE(
    "a sweep's neighbours: other users' runs on its nodes, seen at any look, until forgotten") {
  auto runs = std::make_shared<FakeRuns>();
  const auto run = [](const std::string& name, const std::string& user, const std::string& node) {
    v1::Run r;
    r.set_name(name);
    r.set_user(user);
    r.add_nodes()->set_node_name(node);
    return r;
  };
  v1::Sweep s;
  s.set_id("s1");
  s.set_run_name("gpt");  // alice's run, whose MFU dropped
  s.add_node_names("a");
  s.add_node_names("b");
  runs->running = {run("gpt", "alice", "a"), run("alice-eval", "alice", "b"),
                   run("bobs", "bob", "b"), run("elsewhere", "carol", "z")};
  SweepNeighbours neighbours(runs);
  neighbours.Observe(s);
  runs->running.clear();  // gone by the verdict: still seen
  CHECK(neighbours.On(s, "a").empty());
  CHECK(neighbours.On(s, "b") == std::set<std::string>{"bobs (bob)"});
  neighbours.Forget("s1");
  CHECK(neighbours.On(s, "b").empty());
}

TEST_CASE(
    "the hung run's own next attempt is no neighbour of its node's sweep, another user's is") {
  Fixture f;
  for (const auto& n : {"h1", "h2", "h3", "h4"}) f.scheduler->Add(n);
  const auto run = [](const std::string& id, const std::string& user) {
    v1::Run r;
    r.set_id(id);
    r.set_name("name-of-" + id);
    r.set_user(user);
    r.add_nodes()->set_node_name("h2");
    return r;
  };
  f.runs->running = {run("run-9", "alice")};
  v1::ReportRankHangRequest req;
  req.set_run_id("run-9");
  req.set_rank(1);
  req.set_node_name("h2");
  v1::ReportRankHangResponse resp;
  REQUIRE(f.handler->ReportRankHang(kSystem, req, &resp).ok());
  v1::ListSweepsResponse sweeps;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &sweeps).ok());
  REQUIRE(sweeps.sweeps_size() == 1);
  const v1::Sweep s = sweeps.sweeps(0);
  CHECK(s.run_name() == "name-of-run-9");
  // Requeued, its next attempt lands on h2 again before the verdict.
  SECTION("alone: the verdict stands") {
    const v1::Sweep done = f.RunToEnd(s.id(), {{"h2", 0.3}});
    REQUIRE(done.anomalous_nodes_size() == 1);
    CHECK(f.cordon->cordoned.at(0).first == "h2");
    CHECK(f.cordon->drained.empty());
  }
  SECTION("beside bob's run: deferred") {
    f.runs->running.push_back(run("bobs", "bob"));
    const v1::Sweep done = f.RunToEnd(s.id(), {{"h2", 0.3}});
    CHECK(done.anomalous_nodes_size() == 0);
    CHECK(f.cordon->cordoned.empty());
    REQUIRE(f.cordon->drained.size() == 1);
    CHECK(absl::StrContains(f.cordon->drained[0].second, "another tenant's run"));
    REQUIRE(done.findings_size() == 1);
    CHECK(absl::StrContains(done.findings(0), "name-of-bobs (bob)"));
  }
}

}  // namespace health_handler_test
}  // namespace tessera::health
