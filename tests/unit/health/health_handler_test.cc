// The health API's handler against fakes of the scheduler, cordon service and run manager, with
// a fake clock: sweeps through their stages, remediation, GPU faults, hangs, fault injection, the
// run watch and the way back into service.
#include "healthcheck/health_handler.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <set>

#include "services/store/stores.h"
#include "tests/support/metric_values.h"
#include "tests/unit/health/health_fakes.h"

namespace tessera::health {
namespace {
using testing::FakeCordon;
using testing::FakeRuns;
using testing::FakeScheduler;

const auth::Principal kAdmin{"ops", v1::ROLE_ADMIN};
const auth::Principal kUser{"alice", v1::ROLE_USER};
const auth::Principal kSystem{"tessera-worker", v1::ROLE_SYSTEM};

// 7919, 2 * 7919, 3 * 7919 ...: sweep ids and ports a test can predict.
class CountingRandom final : public Random {
 public:
  uint64_t Next() override { return ++counter_ * 7919; }

 private:
  std::atomic<uint64_t> counter_{0};
};

struct Fixture {
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<FakeScheduler> scheduler = std::make_shared<FakeScheduler>();
  std::shared_ptr<FakeCordon> cordon = std::make_shared<FakeCordon>(*scheduler);
  std::shared_ptr<FakeRuns> runs = std::make_shared<FakeRuns>();
  metrics::Registry registry;
  std::unique_ptr<HealthHandler> handler;

  explicit Fixture(HealthConfig config = {}) {
    handler = std::make_unique<HealthHandler>(
        stores.health, scheduler, cordon, runs,
        std::make_shared<IdempotentCalls>(stores.idempotency, clock), clock,
        std::make_shared<CountingRandom>(), config, &registry);
  }
  v1::Sweep Start(std::vector<std::string> nodes = {}) {
    v1::StartSweepRequest req;
    for (auto& n : nodes) req.add_node_names(n);
    v1::StartSweepResponse resp;
    REQUIRE(handler->StartSweep(kAdmin, req, &resp).ok());
    return resp.sweep();
  }
  v1::Sweep Sweep(const std::string& id) { return *stores.health->GetSweep(id); }
  // A node's compute rate at a step of the sweep (0: the first passes; 1...: confirmation).
  using Rate = std::function<double(const std::string& node, int step)>;
  static Rate Fixed(const std::map<std::string, double>& tflops) {
    return [tflops](const std::string& node, int) {
      auto it = tflops.find(node);
      return it == tflops.end() ? 1.0 : it->second;
    };
  }
  // Answers every dispatched canary of `kind`; `tflops` gives each node's compute rate.
  void Answer(v1::HealthCheckKind kind, const std::map<std::string, double>& tflops = {},
              double busbw = 5.0) {
    Answer(kind, Fixed(tflops), busbw);
  }
  void Answer(v1::HealthCheckKind kind, const Rate& rate, double busbw = 5.0) {
    for (const auto& d : scheduler->Take(kind)) {
      v1::ReportHealthResultRequest req;
      auto* r = req.mutable_result();
      r->set_sweep_id(d.start_canary().sweep_id());
      r->set_node_name(d.node_name());
      r->set_kind(kind);
      *r->mutable_group() = d.start_canary().group();
      r->set_verdict(v1::HEALTH_VERDICT_PASSED);
      r->set_step(d.start_canary().step());
      if (kind == v1::HEALTH_CHECK_KIND_COMPUTE_STRESS) {
        r->set_compute_tflops(rate(d.node_name(), d.start_canary().step()));
      } else {
        auto* s = r->add_samples();
        s->set_payload_bytes(64 << 20);
        s->set_busbw_gbps(busbw);
      }
      v1::ReportHealthResultResponse resp;
      REQUIRE(handler->ReportHealthResult(kSystem, req, &resp).ok());
    }
  }
  // Drives the sweep to its end, every canary answered.
  v1::Sweep RunToEnd(const std::string& id, const std::map<std::string, double>& tflops = {}) {
    return RunToEnd(id, Fixed(tflops));
  }
  v1::Sweep RunToEnd(const std::string& id, const Rate& rate) {
    for (int i = 0; i < 100 && Sweep(id).state() == v1::SWEEP_STATE_RUNNING; ++i) {
      handler->Tick();
      Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS, rate);
      Answer(v1::HEALTH_CHECK_KIND_ALLREDUCE);
      clock->Advance(absl::Milliseconds(200));
    }
    return Sweep(id);
  }
};

TEST_CASE("a sweep runs compute stress, then all-reduce rounds, and passes healthy nodes") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  const v1::Sweep started = f.Start();
  CHECK(started.state() == v1::SWEEP_STATE_RUNNING);
  CHECK(started.node_names_size() == 4);
  CHECK(started.expected_results() == 4 + 8);
  CHECK(started.trigger() == v1::SWEEP_TRIGGER_ON_DEMAND);
  CHECK(f.scheduler->dispatched.empty());  // RPCs never dispatch: the tick does

  f.handler->Tick();
  CHECK(f.scheduler->dispatched.size() == 4);  // four machines: one compute round
  CHECK(f.Sweep(started.id()).phase() == 1);
  f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  f.handler->Tick();
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
  CHECK(f.cordon->cordoned[0].second.find("health: sweep " + s.id() + ": c: compute 0.4 TFLOP/s") ==
        0);
  const auto& e = f.cordon->evidence[0].fields();
  CHECK(e.at("verdict").string_value() == "HEALTH_VERDICT_SLOW");
  CHECK(e.at("peer_median_tflops").number_value() == 1.0);
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

TEST_CASE("a node somewhat slow is measured again in turn with peers, then cordoned with all") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  f.scheduler->runs_on["c"] = {"gpt-1"};
  const v1::Sweep s = f.Start();
  f.handler->Tick();
  f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS, {{"c", 0.8}});
  f.handler->Tick();  // all-reduce, two rounds
  for (int round = 0; round < 2; ++round) {
    f.Answer(v1::HEALTH_CHECK_KIND_ALLREDUCE);
    f.handler->Tick();
  }
  CHECK(f.cordon->cordoned.empty());  // a suspect, not a verdict
  // The confirmation: one measurement at a time, numbered, a peer first, then c between peers.
  std::vector<std::string> line;
  for (int step = 1; step <= 9; ++step) {
    auto d = f.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
    REQUIRE(d.size() == 1);
    CHECK(d[0].start_canary().step() == step);
    line.push_back(d[0].node_name());
    f.scheduler->dispatched.push_back(d[0]);  // answered below like any other
    f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS, {{"c", 0.8}});
    f.handler->Tick();
  }
  CHECK(line[1] == "c");
  CHECK(line[3] == "c");
  CHECK(line[5] == "c");
  CHECK(line[7] == "c");
  CHECK(line[0] != "c");
  const v1::Sweep done = f.Sweep(s.id());
  CHECK(done.state() == v1::SWEEP_STATE_FINISHED);
  REQUIRE(done.anomalous_nodes_size() == 1);
  CHECK(done.anomalous_nodes(0) == "c");
  CHECK(done.findings(0).find("c: slow: 0.800 x its peers over 4 pairs") == 0);
  REQUIRE(done.suspects_size() == 1);
  CHECK(done.suspects(0) == done.findings(0));
  CHECK(done.inconclusive_nodes().empty());
  REQUIRE(f.cordon->cordoned.size() == 1);
  const auto& e = f.cordon->evidence[0].fields();
  CHECK(e.at("confirm_pairs").number_value() == 4);
  CHECK(e.at("confirm_2_tflops").number_value() == 0.8);
  CHECK(e.at("confirm_2_peer_tflops").number_value() == 1.0);
  CHECK(e.at("confirm_llr").number_value() > e.at("confirm_llr_slow_bound").number_value());
  CHECK(f.scheduler->evicted.at(0).reason() == v1::ATTEMPT_END_REASON_STRAGGLER);
}

TEST_CASE("a suspect that measures level with its peers again is cleared and stays in service") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  // c was unlucky in the first measurement (the machine dipped), not after.
  const v1::Sweep done = f.RunToEnd(f.Start().id(), [](const std::string& node, int step) {
    return node == "c" && step == 0 ? 0.85 : 1.0;
  });
  CHECK(done.state() == v1::SWEEP_STATE_FINISHED);
  CHECK(done.anomalous_nodes().empty());
  REQUIRE(done.suspects_size() == 1);
  CHECK(done.suspects(0).find("c: cleared: 1.000 x its peers over 4 pairs") == 0);
  CHECK(f.cordon->cordoned.empty());
  v1::ListSweepsResponse sweeps;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &sweeps).ok());
  CHECK(sweeps.sweeps_size() == 1);  // nothing to follow up
}

TEST_CASE("an inconclusive suspect is not cordoned, one follow-up sweep measures it again") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  int c_measured = 0;
  auto rate = [&](const std::string& node, int step) {
    if (node != "c") return 1.0;
    if (step == 0) return 0.9;
    return c_measured++ % 2 == 0 ? 0.922 * 1.08 : 0.922 / 1.08;  // halfway, and noisy
  };
  const v1::Sweep first = f.Start();
  const v1::Sweep done = f.RunToEnd(first.id(), rate);
  CHECK(done.state() == v1::SWEEP_STATE_FINISHED);
  CHECK(done.anomalous_nodes().empty());
  CHECK(f.cordon->cordoned.empty());
  REQUIRE(done.inconclusive_nodes_size() == 1);
  CHECK(done.inconclusive_nodes(0) == "c");
  REQUIRE(done.suspects_size() == 1);
  CHECK(done.suspects(0).find("c: inconclusive: 0.922 x its peers over 16 pairs") == 0);
  v1::ListSweepsResponse sweeps;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &sweeps).ok());
  REQUIRE(sweeps.sweeps_size() == 2);
  const v1::Sweep follow_up =
      sweeps.sweeps(0).id() == first.id() ? sweeps.sweeps(1) : sweeps.sweeps(0);
  CHECK(follow_up.follows_sweep_id() == first.id());
  CHECK(follow_up.node_names_size() == 4);
  CHECK(follow_up.trigger_detail() ==
        "measuring again what sweep " + first.id() + " left inconclusive (c)");
  // Inconclusive again: the follow-up has no follow-up of its own.
  const v1::Sweep again = f.RunToEnd(follow_up.id(), rate);
  CHECK(again.inconclusive_nodes_size() == 1);
  v1::ListSweepsResponse after;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &after).ok());
  CHECK(after.sweeps_size() == 2);
}

TEST_CASE("a suspect that does not answer its re-measurement times out and is taken out") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  const v1::Sweep s = f.Start();
  for (int i = 0; i < 10 && f.Sweep(s.id()).phase() < 4; ++i) {  // compute, 2 all-reduce, step 1
    f.handler->Tick();
    f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS, {{"c", 0.8}});
    f.Answer(v1::HEALTH_CHECK_KIND_ALLREDUCE);
  }
  f.handler->Tick();  // step 1 (a peer) answered: step 2 measures c
  auto d = f.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  REQUIRE(d.size() == 1);
  CHECK(d[0].node_name() == "c");
  CHECK(d[0].start_canary().step() == 2);
  f.clock->Advance(absl::Seconds(36));  // past the compute deadline (30 s + 5 s)
  f.handler->Tick();
  // The peer after it still completes the round.
  auto peer = f.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  REQUIRE(peer.size() == 1);
  CHECK(peer[0].start_canary().step() == 3);
  f.scheduler->dispatched.push_back(peer[0]);
  f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  f.handler->Tick();
  const v1::Sweep done = f.Sweep(s.id());
  CHECK(done.state() == v1::SWEEP_STATE_FINISHED);
  REQUIRE(done.anomalous_nodes_size() == 1);
  CHECK(done.findings(0) ==
        "c: compute stress HEALTH_VERDICT_TIMEOUT when measured again: no result before the "
        "sweep's deadline");
  CHECK(f.cordon->cordoned.size() == 1);
}

TEST_CASE("what does not answer before the deadline times out and is taken out") {
  Fixture f;
  for (const auto& n : {"a", "b"}) f.scheduler->Add(n);
  f.scheduler->unreachable.insert("b");
  const v1::Sweep s = f.Start();
  f.handler->Tick();
  f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);  // a answers; b never started
  f.handler->Tick();
  // b's compute failed to start: its result is an ERROR, so the stage is complete.
  auto pair = f.scheduler->Take(v1::HEALTH_CHECK_KIND_ALLREDUCE);
  CHECK(pair.size() == 1);              // a's half; b's could not start either
  f.clock->Advance(absl::Seconds(66));  // past the all-reduce deadline: a's half never answered
  f.handler->Tick();
  const v1::Sweep done = f.Sweep(s.id());
  CHECK(done.state() == v1::SWEEP_STATE_FINISHED);
  REQUIRE(done.anomalous_nodes_size() == 1);
  CHECK(done.anomalous_nodes(0) == "b");
  CHECK(done.findings(0).find("could not start") != std::string::npos);
  CHECK(f.scheduler->evicted.at(0).reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
}

TEST_CASE("nodes of one machine take turns at the compute stress test") {
  Fixture f;
  for (const auto& n : {"a", "b", "c"}) f.scheduler->Add(n, "127.0.0.1");
  const v1::Sweep s = f.Start();
  for (int round = 1; round <= 3; ++round) {
    f.handler->Tick();
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
  config.watch.mfu_reports = 2;
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
    f.handler->Tick();
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

}  // namespace
}  // namespace tessera::health
