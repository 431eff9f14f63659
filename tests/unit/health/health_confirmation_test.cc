// The health API's handler confirming suspects: measured again one step at a time in turn with
// peers, cordoned with every pair, cleared, inconclusive (with one follow-up sweep), or timed out.
#include <catch2/catch.hpp>

#include "tests/unit/health/handler_fixture.h"

namespace tessera::health {
namespace health_confirmation_test {
using namespace handler_test;  // NOLINT: the fixture is this test's vocabulary

TEST_CASE(
    "a node somewhat slow is measured again in turn with peers, found slow again by a "
    "follow-up sweep, then cordoned with all") {
  HealthConfig config;
  config.canary.compute_threads = 1;  // the re-measurements measure as the first passes do
  Fixture f(config);
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  f.scheduler->runs_on["c"] = {"gpt-1"};
  const v1::Sweep s = f.Start();
  f.health.Tick();
  f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS, {{"c", 0.8}});
  f.health.Tick();  // all-reduce, two rounds
  for (int round = 0; round < 2; ++round) {
    f.Answer(v1::HEALTH_CHECK_KIND_ALLREDUCE);
    f.health.Tick();
  }
  CHECK(f.cordon->cordoned.empty());  // a suspect, not a verdict
  // The confirmation: one measurement at a time, numbered, a peer first, then c between peers,
  // until the test may call it slow (min_pairs_slow pairs).
  const int pairs = config.anomaly.confirmation.test.min_pairs_slow;
  std::vector<std::string> line;
  for (int step = 1; step <= 1 + 2 * pairs; ++step) {
    auto d = f.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
    REQUIRE(d.size() == 1);
    CHECK(d[0].start_canary().step() == step);
    CHECK(d[0].start_canary().threads() == 1);
    // Each step dispatched is one more result the sweep waits for.
    CHECK(f.Sweep(s.id()).expected_results() == s.expected_results() + step);
    line.push_back(d[0].node_name());
    f.scheduler->dispatched.push_back(d[0]);  // answered below like any other
    f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS, {{"c", 0.8}});
    f.health.Tick();
  }
  for (int k = 0; k < pairs; ++k) CHECK(line[static_cast<size_t>(1 + 2 * k)] == "c");
  CHECK(line[0] != "c");
  // Slow on this sweep's evidence alone: not cordoned, measured again by a follow-up.
  const v1::Sweep done = f.Sweep(s.id());
  CHECK(done.state() == v1::SWEEP_STATE_FINISHED);
  CHECK(done.anomalous_nodes().empty());
  CHECK(f.cordon->cordoned.empty());
  CHECK(f.scheduler->evicted.empty());
  REQUIRE(done.repeat_nodes_size() == 1);
  CHECK(done.repeat_nodes(0) == "c");
  CHECK(done.inconclusive_nodes().empty());
  REQUIRE(done.suspects_size() == 1);
  CHECK(done.suspects(0).find("c: slow: 0.800 x its peers' compute rate over 6 pairs") == 0);
  CHECK(done.suspects(0).find("not cordoned on one sweep: a follow-up sweep measures it again") !=
        std::string::npos);
  v1::ListSweepsResponse sweeps;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &sweeps).ok());
  REQUIRE(sweeps.sweeps_size() == 2);
  const v1::Sweep follow_up = sweeps.sweeps(0).id() == s.id() ? sweeps.sweeps(1) : sweeps.sweeps(0);
  CHECK(follow_up.follows_sweep_id() == s.id());
  CHECK(follow_up.trigger_detail() == "measuring again what sweep " + s.id() + " found slow (c)");

  // The follow-up measures c afresh, even though it looks level at first this time.
  const v1::Sweep again = f.RunToEnd(follow_up.id(), [](const std::string& node, int step) {
    return node == "c" && step > 0 ? 0.8 : 1.0;
  });
  REQUIRE(again.anomalous_nodes_size() == 1);
  CHECK(again.anomalous_nodes(0) == "c");
  CHECK(again.findings(0).find("c: slow: 0.800 x its peers' compute rate over 6 pairs") == 0);
  CHECK(again.findings(0).find("slow in the sweep before too, measured apart: 0.800 x its peers "
                               "over 6 pairs") != std::string::npos);
  CHECK(again.repeat_nodes().empty());
  REQUIRE(f.cordon->cordoned.size() == 1);
  const auto& e = f.cordon->evidence[0].fields();
  CHECK(e.at("confirm_pairs").number_value() == 6);  // this sweep's own pairs only
  CHECK(e.at("earlier_confirm_pairs").number_value() == 6);
  CHECK(e.at("confirm_2_tflops").number_value() == 0.8);
  CHECK(e.at("confirm_2_peer_tflops").number_value() == 1.0);
  CHECK(e.at("confirm_llr").number_value() > e.at("confirm_llr_slow_bound").number_value());
  CHECK(f.scheduler->evicted.at(0).reason() == v1::ATTEMPT_END_REASON_STRAGGLER);
  v1::ListSweepsResponse after;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &after).ok());
  CHECK(after.sweeps_size() == 2);  // a follow-up is not followed up
}

TEST_CASE("a node found slow once and level in the follow-up stays in service") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  const v1::Sweep first = f.RunToEnd(
      f.Start().id(), [](const std::string& node, int) { return node == "c" ? 0.8 : 1.0; });
  REQUIRE(first.repeat_nodes_size() == 1);
  v1::ListSweepsResponse sweeps;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &sweeps).ok());
  REQUIRE(sweeps.sweeps_size() == 2);
  const v1::Sweep follow_up =
      sweeps.sweeps(0).id() == first.id() ? sweeps.sweeps(1) : sweeps.sweeps(0);
  // The machine's noise, not the node: level with its peers when measured again, over as many
  // pairs as found it slow (6: identical figures decide at the first chance).
  const v1::Sweep again = f.RunToEnd(follow_up.id(), [](const std::string&, int) { return 1.0; });
  CHECK(again.anomalous_nodes().empty());
  REQUIRE(again.suspects_size() == 1);
  CHECK(again.suspects(0).find("c: cleared: 1.000 x its peers' compute rate over 6 pairs") == 0);
  CHECK(f.cordon->cordoned.empty());
  CHECK(f.scheduler->evicted.empty());
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
  CHECK(done.suspects(0).find("c: cleared: 1.000 x its peers' compute rate over 4 pairs") == 0);
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
  CHECK(done.suspects(0).find("c: inconclusive: 0.922 x its peers' compute rate over 16 pairs") ==
        0);
  v1::ListSweepsResponse sweeps;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &sweeps).ok());
  REQUIRE(sweeps.sweeps_size() == 2);
  const v1::Sweep follow_up =
      sweeps.sweeps(0).id() == first.id() ? sweeps.sweeps(1) : sweeps.sweeps(0);
  CHECK(follow_up.follows_sweep_id() == first.id());
  CHECK(follow_up.node_names_size() == 4);
  CHECK(follow_up.trigger_detail() ==
        "measuring again what sweep " + first.id() + " left inconclusive (c)");
  // c now measures level with its peers at first, but the follow-up carries on with its 16
  // pairs; inconclusive again after 16 more, and the follow-up has no follow-up of its own.
  auto level_at_first = [&](const std::string& node, int step) {
    return node == "c" && step == 0 ? 1.0 : rate(node, step);
  };
  const v1::Sweep again = f.RunToEnd(follow_up.id(), level_at_first);
  REQUIRE(again.inconclusive_nodes_size() == 1);
  REQUIRE(again.suspects_size() == 1);
  CHECK(again.suspects(0).find("c: inconclusive: 0.922 x its peers' compute rate over 32 pairs") ==
        0);
  v1::ListSweepsResponse after;
  REQUIRE(f.handler->ListSweeps(kUser, v1::ListSweepsRequest{}, &after).ok());
  CHECK(after.sweeps_size() == 2);
}

TEST_CASE("a suspect that does not answer its re-measurement times out and is taken out") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  const v1::Sweep s = f.Start();
  for (int i = 0; i < 10 && f.Sweep(s.id()).phase() < 4; ++i) {  // compute, 2 all-reduce, step 1
    f.health.Tick();
    f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS, {{"c", 0.8}});
    f.Answer(v1::HEALTH_CHECK_KIND_ALLREDUCE);
  }
  f.health.Tick();  // step 1 (a peer) answered: step 2 measures c
  auto d = f.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  REQUIRE(d.size() == 1);
  CHECK(d[0].node_name() == "c");
  CHECK(d[0].start_canary().step() == 2);
  f.clock->Advance(absl::Seconds(36));  // past the compute deadline (30 s + 5 s)
  f.health.Tick();
  // The peer after it still completes the round.
  auto peer = f.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  REQUIRE(peer.size() == 1);
  CHECK(peer[0].start_canary().step() == 3);
  f.scheduler->dispatched.push_back(peer[0]);
  f.Answer(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  f.health.Tick();
  const v1::Sweep done = f.Sweep(s.id());
  CHECK(done.state() == v1::SWEEP_STATE_FINISHED);
  REQUIRE(done.anomalous_nodes_size() == 1);
  CHECK(done.findings(0) ==
        "c: compute stress HEALTH_VERDICT_TIMEOUT when measured again: no result before the "
        "sweep's deadline");
  CHECK(f.cordon->cordoned.size() == 1);
}

}  // namespace health_confirmation_test
}  // namespace tessera::health
