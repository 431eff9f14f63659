// SweepTriggers' straggler path through the health API (fake scheduler, cordon service and run
// manager, fake clock): the run is moved off a straggler at once where it can go on without it,
// while the sweep it starts judges the node; and the sweep's neighbours are told apart from the
// run's own nodes.
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "healthcheck/sweep_neighbours.h"
#include "tests/unit/health/handler_fixture.h"

namespace tessera::health::handler_test {
namespace sweep_triggers_test {

// A run of alice's on `nodes`, attempt `resumption`.
v1::Run RunOn(const std::vector<std::string>& nodes, int resumption = 0) {
  v1::Run run;
  run.set_id("run-7");
  run.set_name("gpt-7");
  run.set_user("alice");
  run.set_resumption_index(resumption);
  for (const auto& n : nodes) run.add_nodes()->set_node_name(n);
  return run;
}

// Feeds `reports` progress reports in which `slow` computes a step in 3 s and the others in 1 s,
// one per run watch interval.
void Straggle(Fixture& f, v1::Run run, const std::string& slow, int reports = 3) {
  static int64_t reported = 0;
  for (int i = 0; i < reports; ++i) {
    auto& compute = *run.mutable_progress()->mutable_node_compute_seconds();
    for (const auto& n : run.nodes()) compute[n.node_name()] = n.node_name() == slow ? 3.0 : 1.0;
    run.mutable_progress()->mutable_reported_at()->set_seconds(++reported);
    f.runs->running = {run};
    f.clock->Advance(HealthConfig{}.triggers.run_watch_interval);  // each report looked at
    f.health.Tick();
  }
}

std::vector<v1::Sweep> Sweeps(Fixture& f) {
  v1::ListSweepsResponse sweeps;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &sweeps).ok());
  return {sweeps.sweeps().begin(), sweeps.sweeps().end()};
}

TEST_CASE(
    "a straggler's run is moved off it at once when an idle node of its pool is free, and the "
    "sweep it starts judges the node") {
  Fixture f;
  for (const auto& n : {"a", "b", "c"}) f.scheduler->Add(n).set_gpu_count(8);
  Straggle(f, RunOn({"a", "b"}), "b");
  const auto sweeps = Sweeps(f);
  REQUIRE(sweeps.size() == 1);
  const v1::Sweep& s = sweeps[0];
  CHECK(s.trigger() == v1::SWEEP_TRIGGER_STRAGGLER);
  CHECK(s.suspect_node() == "b");
  CHECK(std::vector<std::string>(s.run_nodes().begin(), s.run_nodes().end()) ==
        std::vector<std::string>{"a", "b"});
  CHECK(s.node_names_size() == 3);  // the run's two and the idle peer
  REQUIRE(f.scheduler->evicted.size() == 1);
  const v1::EvictNodeRequest& moved = f.scheduler->evicted[0];
  CHECK(moved.node_name() == "b");
  CHECK(moved.run_id() == "run-7");  // this run only: the node's other tenants stay
  CHECK(moved.reason() == v1::ATTEMPT_END_REASON_STRAGGLER);
  CHECK(moved.detection_method() == v1::DETECTION_METHOD_STRAGGLER_WATCH);
  CHECK(absl::StrContains(moved.detail(), "node b computes a step in 3.000 s"));
  CHECK(absl::StrContains(moved.detail(), "checked by sweep " + s.id()));
  // The run resumes on a and the idle c; b, slow on its own, is condemned by the sweep.
  f.runs->running = {RunOn({"a", "c"}, 1)};
  const v1::Sweep done = f.RunToEnd(s.id(), {{"b", 0.3}});
  REQUIRE(done.anomalous_nodes_size() == 1);
  CHECK(done.anomalous_nodes(0) == "b");
  REQUIRE(f.cordon->cordoned.size() == 1);
  CHECK(f.cordon->cordoned[0].first == "b");
}

TEST_CASE("a straggler's run stays where it has nowhere to go, and the sweep alone decides") {
  Fixture f;
  for (const auto& n : {"a", "b"}) f.scheduler->Add(n).set_gpu_count(8);
  SECTION("no idle node") {}
  SECTION("the idle node is of another pool") {
    f.scheduler->Add("c").set_gpu_count(4);
    f.scheduler->Add("d").set_gpu_count(8);
    f.scheduler->nodes["d"].set_gpu_type("a100");
  }
  SECTION("the idle node is cordoned") {
    f.scheduler->Add("c").set_gpu_count(8);
    f.scheduler->nodes["c"].set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  }
  Straggle(f, RunOn({"a", "b"}), "b");
  REQUIRE(Sweeps(f).size() == 1);
  CHECK(f.scheduler->evicted.empty());
}

TEST_CASE("a run that accepts fewer nodes is moved off its straggler with no idle node") {
  Fixture f;
  for (const auto& n : {"a", "b"}) f.scheduler->Add(n);
  v1::Run run = RunOn({"a", "b"});
  run.mutable_spec()->mutable_compute()->set_nodes(2);
  run.mutable_spec()->mutable_compute()->set_min_nodes(1);
  Straggle(f, run, "b");
  REQUIRE(f.scheduler->evicted.size() == 1);
  CHECK(f.scheduler->evicted[0].node_name() == "b");
}

TEST_CASE("a run that names its nodes keeps them, and the flag turns moves off") {
  HealthConfig config;
  v1::Run run = RunOn({"a", "b"});
  SECTION("named nodes") {
    run.mutable_spec()->mutable_compute()->add_node_names("a");
    run.mutable_spec()->mutable_compute()->add_node_names("b");
  }
  SECTION("--move-off-stragglers=false") { config.triggers.moves.enabled = false; }
  Fixture f(config);
  for (const auto& n : {"a", "b", "c"}) f.scheduler->Add(n);
  Straggle(f, run, "b");
  REQUIRE(Sweeps(f).size() == 1);
  CHECK(f.scheduler->evicted.empty());
}

// The runs moved off stragglers so far: the nodes they were moved off (the sweeps' own
// evictions, of nodes whose canaries were never answered here, left out).
std::vector<std::string> MovedOff(const Fixture& f) {
  std::vector<std::string> nodes;
  for (const auto& e : f.scheduler->evicted) {
    if (e.detection_method() == v1::DETECTION_METHOD_STRAGGLER_WATCH)
      nodes.push_back(e.node_name());
  }
  return nodes;
}

// Drives every running sweep to its end, every node passing.
void FinishSweeps(Fixture& f) {
  for (const auto& s : Sweeps(f)) {
    if (s.state() == v1::SWEEP_STATE_RUNNING) f.RunToEnd(s.id());
  }
}

TEST_CASE(
    "a run moved off a straggler rests before it is moved again, twice as long after each move, "
    "its stragglers meanwhile only swept") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  const absl::Duration rest = HealthConfig{}.triggers.moves.rest;
  int resumption = 0;
  // The run, on a and a second node that straggles: moved off it or not, its sweep finished.
  const auto straggles_on = [&](const std::string& node) {
    Straggle(f, RunOn({"a", node}, resumption++), node);
    FinishSweeps(f);
  };
  straggles_on("b");
  REQUIRE(MovedOff(f) == std::vector<std::string>{"b"});
  f.clock->Advance(rest / 2);
  straggles_on("c");  // within its rest: swept, not moved
  CHECK(Sweeps(f).size() == 2);
  CHECK(MovedOff(f) == std::vector<std::string>{"b"});
  f.clock->Advance(rest / 2);
  straggles_on("c");  // past it
  CHECK(MovedOff(f) == std::vector<std::string>{"b", "c"});
  f.clock->Advance(rest);
  straggles_on("d");  // the second rest is twice as long
  CHECK(MovedOff(f) == std::vector<std::string>{"b", "c"});
  f.clock->Advance(rest);
  straggles_on("d");
  CHECK(MovedOff(f) == std::vector<std::string>{"b", "c", "d"});
}

TEST_CASE(
    "a straggler seen during the run's rest moves it once the rest is over, if it still "
    "straggles then") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  Straggle(f, RunOn({"a", "b"}), "b");
  FinishSweeps(f);
  Straggle(f, RunOn({"a", "c"}, 1), "c");  // in its rest: noted, swept
  FinishSweeps(f);
  REQUIRE(MovedOff(f) == std::vector<std::string>{"b"});
  SECTION("still straggling in its newest report: moved then") {
    f.clock->Advance(HealthConfig{}.triggers.moves.rest);
    f.health.Tick();
    REQUIRE(MovedOff(f) == std::vector<std::string>{"b", "c"});
    CHECK(absl::StrContains(f.scheduler->evicted.back().detail(),
                            "seen during the run's rest after its last move; 3.0 x at its end"));
  }
  SECTION("even again by then: it stays") {
    v1::Run even = RunOn({"a", "c"}, 1);
    (*even.mutable_progress()->mutable_node_compute_seconds())["a"] = 1.0;
    (*even.mutable_progress()->mutable_node_compute_seconds())["c"] = 1.1;
    even.mutable_progress()->mutable_reported_at()->set_seconds(100000);
    f.runs->running = {even};
    f.clock->Advance(HealthConfig{}.triggers.moves.rest);
    f.health.Tick();
    CHECK(MovedOff(f) == std::vector<std::string>{"b"});
  }
}

TEST_CASE(
    "a straggler whose run has a sweep measuring it gets no second sweep, and the move stands") {
  HealthConfig config;
  config.canary.compute_timeout = absl::Hours(1);  // the first sweep's canaries stay unanswered
  Fixture f(config);
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  Straggle(f, RunOn({"a", "b"}), "b");
  REQUIRE(Sweeps(f).size() == 1);
  const std::string first = Sweeps(f)[0].id();
  // Resumed on a and c, the run finds c slow too while the first sweep (of a, b, c, d) is still
  // measuring: no other sweep of the same nodes; the rest holds the run where it is.
  Straggle(f, RunOn({"a", "c"}, 1), "c");
  REQUIRE(Sweeps(f).size() == 1);
  CHECK(Sweeps(f)[0].state() == v1::SWEEP_STATE_RUNNING);
  CHECK(MovedOff(f) == std::vector<std::string>{"b"});
  // Past its rest, it is moved again, the running sweep named as the node's judge.
  f.clock->Advance(config.triggers.moves.rest);
  Straggle(f, RunOn({"a", "c"}, 2), "c");
  REQUIRE(Sweeps(f).size() == 1);
  REQUIRE(MovedOff(f) == std::vector<std::string>{"b", "c"});
  CHECK(absl::StrContains(f.scheduler->evicted.back().detail(), "checked by sweep " + first));
}

TEST_CASE(
    "a run's user's runs are no neighbours of its sweep on the nodes it held, but are on the "
    "others") {
  auto runs = std::make_shared<FakeRuns>();
  const auto run = [](const std::string& name, const std::string& user,
                      const std::vector<std::string>& nodes) {
    v1::Run r;
    r.set_name(name);
    r.set_user(user);
    for (const auto& n : nodes) r.add_nodes()->set_node_name(n);
    return r;
  };
  v1::Sweep s;
  s.set_id("s1");
  s.set_run_name("gpt");
  s.set_suspect_node("b");
  for (const auto& n : {"a", "b", "c", "d"}) s.add_node_names(n);
  // gpt was on a and b; moved off b, it resumed on a and the idle peer c.
  runs->running = {run("gpt", "alice", {"a", "c"}), run("alice-eval", "alice", {"b", "d"})};
  SweepNeighbours neighbours(runs);
  SECTION("run_nodes recorded") {
    s.add_run_nodes("a");
    s.add_run_nodes("b");
    neighbours.Observe(s);
    CHECK(neighbours.On(s, "a").empty());
    CHECK(neighbours.On(s, "b").empty());
    CHECK(neighbours.On(s, "c") == std::set<std::string>{"gpt (alice)"});
    CHECK(neighbours.On(s, "d") == std::set<std::string>{"alice-eval (alice)"});
  }
  SECTION("a sweep stored before run_nodes: the user's runs are no neighbours anywhere") {
    neighbours.Observe(s);
    for (const auto& n : {"a", "b", "c", "d"}) CHECK(neighbours.On(s, n).empty());
  }
}

}  // namespace sweep_triggers_test
}  // namespace tessera::health::handler_test
