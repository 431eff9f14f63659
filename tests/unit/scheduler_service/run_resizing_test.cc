// Runs that accept fewer nodes (compute.min_nodes): RunResizing's rules on a fake clock, and the
// scheduler's roles together resuming a run on the node it has left once no other comes within
// --shrink-after-seconds, then growing it back to both right after its next checkpoint.
#include "scheduler/service/run_resizing.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "base/timestamps.h"
#include "tests/unit/scheduler_service/scheduler_fixture.h"

namespace tessera::scheduler {
namespace run_resizing_test {

v1::Run Shrinkable(int nodes, int min_nodes, int resumption, int running_on = 0) {
  v1::Run run;
  run.set_id("r1");
  run.set_name("big");
  run.set_status(running_on > 0 ? v1::RUN_STATUS_RUNNING : v1::RUN_STATUS_QUEUED);
  run.mutable_spec()->mutable_compute()->set_gpus(8 * nodes);
  run.mutable_spec()->mutable_compute()->set_nodes(nodes);
  run.mutable_spec()->mutable_compute()->set_min_nodes(min_nodes);
  run.set_resumption_index(resumption);
  for (int i = 0; i < running_on; ++i) run.add_nodes()->set_node_name(absl::StrCat("n", i));
  return run;
}

TEST_CASE("a requeued run may shrink only once it has waited shrink_after for all its nodes") {
  auto clock = std::make_shared<FakeClock>();
  RunResizing resizing(clock, absl::Seconds(30));
  v1::Run run = Shrinkable(4, 2, 1);
  *run.mutable_updated_at() = ToProtoTime(clock->Now());
  CHECK(resizing.MinNodesNow(run) == 0);
  CHECK(resizing.UntilShrinkable(run) == absl::Seconds(30));
  CHECK(resizing.QueueNote(run) ==
        "; it may start on as few as 2 of its 4 nodes (compute.min_nodes) in 30s");
  clock->Advance(absl::Seconds(29) + absl::Milliseconds(100));
  CHECK(resizing.MinNodesNow(run) == 0);
  CHECK(resizing.QueueNote(run) ==
        "; it may start on as few as 2 of its 4 nodes (compute.min_nodes) in 1s");
  clock->Advance(absl::Milliseconds(900));
  CHECK(resizing.MinNodesNow(run) == 2);
  CHECK(resizing.UntilShrinkable(run) == absl::ZeroDuration());
  CHECK(resizing.QueueNote(run) ==
        "; it starts on as few as 2 of its 4 nodes (compute.min_nodes) once free");
  // A first attempt waits for all of its nodes, as every run does.
  v1::Run first = run;
  first.set_resumption_index(0);
  CHECK(resizing.MinNodesNow(first) == 0);
  CHECK(resizing.UntilShrinkable(first) == absl::InfiniteDuration());
  CHECK(resizing.QueueNote(first).empty());
  // A run that accepts no fewer.
  v1::Run fixed = run;
  fixed.mutable_spec()->mutable_compute()->set_min_nodes(0);
  CHECK(resizing.MinNodesNow(fixed) == 0);
  CHECK(resizing.QueueNote(fixed).empty());
  fixed.mutable_spec()->mutable_compute()->set_min_nodes(4);
  CHECK(resizing.MinNodesNow(fixed) == 0);
  CHECK(resizing.QueueNote(fixed).empty());

  CHECK(resizing.Placed(run, 4).empty());
  CHECK(resizing.Placed(run, 3) ==
        "Resumed on 3 of its 4 nodes (compute.min_nodes is 2): not all of them came free within "
        "30s of its requeue; it grows back after a checkpoint once they are");
}

TEST_CASE("a shrunk run grows only after a checkpoint committed since all its nodes came free") {
  auto clock = std::make_shared<FakeClock>();
  RunResizing resizing(clock, absl::Seconds(30));
  std::vector<v1::Run> active{Shrinkable(2, 1, 1, /*running_on=*/1)};
  active[0].mutable_progress()->set_checkpoint_interval_steps(10);
  active[0].mutable_progress()->set_checkpoint_step(10);
  bool free = false;
  const auto can_grow = [&](const v1::Run&) { return free; };
  CHECK(resizing.DueToGrow(active, can_grow).empty());  // no room
  free = true;
  CHECK(resizing.DueToGrow(active, can_grow).empty());  // room: waits for a new checkpoint
  CHECK(resizing.DueToGrow(active, can_grow).empty());
  active[0].mutable_progress()->set_checkpoint_step(20);
  auto due = resizing.DueToGrow(active, can_grow);
  REQUIRE(due.size() == 1);
  CHECK(due[0].run == &active[0]);
  CHECK(due[0].why ==
        "all 2 of its nodes are free again; stopped right after its checkpoint of step 20 to "
        "resume on all of them");

  SECTION("room lost before the checkpoint starts the wait over") {
    RunResizing again(clock, absl::Seconds(30));
    active[0].mutable_progress()->set_checkpoint_step(30);
    CHECK(again.DueToGrow(active, can_grow).empty());
    free = false;
    CHECK(again.DueToGrow(active, can_grow).empty());
    free = true;
    active[0].mutable_progress()->set_checkpoint_step(40);
    CHECK(again.DueToGrow(active, can_grow).empty());  // 40 is the new baseline
    active[0].mutable_progress()->set_checkpoint_step(50);
    CHECK(again.DueToGrow(active, can_grow).size() == 1);
  }
  SECTION("a run whose trainer reports no checkpoints never grows") {
    RunResizing again(clock, absl::Seconds(30));
    active[0].mutable_progress()->Clear();
    for (int i = 0; i < 3; ++i) CHECK(again.DueToGrow(active, can_grow).empty());
  }
  SECTION("a run on all of its nodes, or not running, is not grown") {
    RunResizing again(clock, absl::Seconds(30));
    std::vector<v1::Run> others{Shrinkable(2, 1, 1, /*running_on=*/2), Shrinkable(2, 1, 1)};
    for (auto& r : others) r.mutable_progress()->set_checkpoint_step(10);
    CHECK(again.DueToGrow(others, can_grow).empty());
    for (auto& r : others) r.mutable_progress()->set_checkpoint_step(20);
    CHECK(again.DueToGrow(others, can_grow).empty());
  }
}

TEST_CASE("a run that loses a node soon after growing back waits longer before it grows again") {
  auto clock = std::make_shared<FakeClock>();
  RunResizing resizing(clock, absl::Seconds(30));
  std::vector<v1::Run> active{Shrinkable(2, 1, 1, /*running_on=*/1)};
  v1::Run& run = active[0];
  int64_t checkpoint = 10;
  const auto free = [](const v1::Run&) { return true; };
  // Checkpoints come every `every` while all its nodes are free, until the run is due to grow;
  // returns how long that took, and the stop's reason.
  const auto grow = [&](absl::Duration every, std::string* why = nullptr) {
    absl::Duration waited;
    for (int i = 0; i < 1000; ++i) {
      run.mutable_progress()->set_checkpoint_step(checkpoint += 10);
      auto due = resizing.DueToGrow(active, free);
      if (!due.empty()) {
        if (why) *why = due[0].why;
        return waited;
      }
      clock->Advance(every);
      waited += every;
    }
    FAIL("never grew");
    return waited;
  };
  CHECK(grow(absl::Seconds(1)) == absl::Seconds(1));  // one checkpoint after they came free
  CHECK(resizing.RegrowDelay(run.id()) == absl::ZeroDuration());

  // It loses a node 5 minutes after growing back: a flap.
  clock->Advance(absl::Minutes(5));
  CHECK(resizing.Placed(run, 1) ==
        "Resumed on 1 of its 2 nodes (compute.min_nodes is 1): not all of them came free within "
        "30s of its requeue; it lost a node within 1h of growing back 1 time, so it grows back "
        "after a checkpoint once they have stayed free for 1m");
  CHECK(resizing.RegrowDelay(run.id()) == absl::Minutes(1));
  std::string why;
  // Free for a minute, then the next checkpoint.
  CHECK(grow(absl::Seconds(10), &why) == absl::Seconds(60));
  CHECK(why ==
        "all 2 of its nodes are free again (and stayed free for 1m: it lost a node soon after "
        "growing back before); stopped right after its checkpoint of step " +
            std::to_string(checkpoint) + " to resume on all of them");

  SECTION("each flap in a row doubles the wait, up to an hour") {
    std::vector<absl::Duration> delays;
    for (int flap = 2; flap <= 9; ++flap) {
      clock->Advance(absl::Minutes(1));
      resizing.Placed(run, 1);
      delays.push_back(resizing.RegrowDelay(run.id()));
      CHECK(grow(absl::Seconds(10)) == delays.back());
    }
    CHECK(delays == std::vector<absl::Duration>{
                        absl::Minutes(2), absl::Minutes(4), absl::Minutes(8), absl::Minutes(16),
                        absl::Minutes(32), absl::Hours(1), absl::Hours(1), absl::Hours(1)});
  }
  SECTION("a loss more than an hour after growing back starts the count over") {
    clock->Advance(absl::Minutes(61));
    CHECK(
        absl::EndsWith(resizing.Placed(run, 1), "it grows back after a checkpoint once they are"));
    CHECK(resizing.RegrowDelay(run.id()) == absl::ZeroDuration());
  }
  SECTION("a shrunk run losing another node is no flap") {
    clock->Advance(absl::Minutes(1));
    resizing.Placed(run, 1);
    CHECK(resizing.RegrowDelay(run.id()) == absl::Minutes(2));
    clock->Advance(absl::Minutes(1));
    resizing.Placed(run, 1);  // never grew in between
    CHECK(resizing.RegrowDelay(run.id()) == absl::Minutes(2));
  }
  SECTION("what is remembered goes an hour after the run is no longer shrunk") {
    run.clear_nodes();
    run.set_status(v1::RUN_STATUS_COMPLETED);
    clock->Advance(absl::Minutes(61));
    CHECK(resizing.DueToGrow(active, free).empty());
    CHECK(resizing.RegrowDelay(run.id()) == absl::ZeroDuration());
  }
}

// The scheduler with a 30 s shrink bound over two nodes n1 and n2.
struct ResizeFixture : Fixture {
  ResizeFixture() {
    config.shrink_after = absl::Seconds(30);
    core = NewCore();
    Register("n1");
    Register("n2");
  }
  v1::Run SubmitTwoNodes() {
    v1::SubmitRunRequest req;
    req.mutable_spec()->set_name("big");
    req.mutable_spec()->set_command("x");
    req.mutable_spec()->mutable_compute()->set_gpus(16);
    req.mutable_spec()->mutable_compute()->set_nodes(2);
    req.mutable_spec()->mutable_compute()->set_min_nodes(1);
    req.mutable_spec()->mutable_scheduling()->set_retry_on_system_failure(true);
    v1::SubmitRunResponse resp;
    REQUIRE(manager.SubmitRun({"alice", v1::ROLE_USER}, req, &resp).ok());
    return resp.run();
  }
  void Update(const std::string& node, const v1::Run& run, int resumption, v1::AttemptPhase phase) {
    v1::AttemptUpdate update;
    update.set_run_id(run.id());
    update.set_resumption_index(resumption);
    update.set_phase(phase);
    REQUIRE(core->sessions->OnAttemptUpdate(node, update).ok());
  }
  void Progress(const v1::Run& run, int resumption, int64_t step, int64_t checkpoint) {
    v1::ReportProgressRequest req;
    req.set_run_id(run.id());
    req.set_resumption_index(resumption);
    req.set_node_name("n1");
    req.mutable_progress()->set_step(step);
    req.mutable_progress()->set_checkpoint_interval_steps(10);
    req.mutable_progress()->set_checkpoint_step(checkpoint);
    v1::ReportProgressResponse resp;
    REQUIRE(run_roles.reports->ReportProgress(kSystem, req, &resp).ok());
  }
  // A second passes; the named nodes beat (n1 with the attempt it runs, if any); one cycle.
  CycleStats Second(std::initializer_list<const char*> beating) {
    clock->Advance(absl::Seconds(1));
    for (const char* node : beating) {
      v1::Heartbeat hb;
      if (std::string(node) == "n1" && n1_attempt >= 0) {
        auto* a = hb.add_attempts();
        a->set_run_id(n1_run);
        a->set_resumption_index(n1_attempt);
        a->add_running_ranks(0);
      }
      REQUIRE(core->sessions->Heartbeat(node, hb).ok());
    }
    auto stats = core->cycle->RunCycle();
    REQUIRE(stats.ok());
    return *stats;
  }
  // The attempt n1 runs (its ranks report in n1's heartbeats): -1 for none.
  std::string n1_run;
  int n1_attempt = -1;

  std::vector<std::string> Events(const v1::Run& run, v1::RunEventType type) {
    std::vector<std::string> out;
    auto events = stores.runs->ListEvents(run.id(), 0, 1000);
    REQUIRE(events.ok());
    for (const auto& e : *events) {
      if (e.type() == type) out.push_back(e.message());
    }
    return out;
  }
  // The StartAttempt commands sent since `from` (an index into `sent`).
  std::vector<std::pair<std::string, v1::StartAttempt>> Starts(size_t from) {
    std::vector<std::pair<std::string, v1::StartAttempt>> out;
    for (size_t i = from; i < sent.size(); ++i) {
      if (sent[i].second.has_start_attempt()) {
        out.emplace_back(sent[i].first, sent[i].second.start_attempt());
      }
    }
    return out;
  }
};

TEST_CASE("a run that lost a node resumes on the one left, then grows back after a checkpoint") {
  ResizeFixture f;
  const v1::Run run = f.SubmitTwoNodes();
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.Get(run).nodes_size() == 2);
  f.Update("n1", run, 0, v1::ATTEMPT_PHASE_STARTED);
  f.Update("n2", run, 0, v1::ATTEMPT_PHASE_STARTED);
  REQUIRE(f.Get(run).status() == v1::RUN_STATUS_RUNNING);
  f.n1_run = run.id();
  f.n1_attempt = 0;

  // n2 goes silent: lost at the lease (3 s), the run requeued; n1's ranks exit.
  for (int i = 0; i < 3; ++i) f.Second({"n1"});
  REQUIRE(f.stores.nodes->GetNode("n2")->liveness() == v1::NODE_LIVENESS_LOST);
  REQUIRE(f.Get(run).resumption_index() == 1);
  f.Update("n1", run, 0, v1::ATTEMPT_PHASE_FINISHED);
  f.n1_attempt = -1;

  // For 30 s it waits for both nodes.
  for (int i = 0; i < 29; ++i) {
    f.Second({"n1"});
    REQUIRE(f.Get(run).status() == v1::RUN_STATUS_QUEUED);
  }
  const size_t before = f.sent.size();
  f.Second({"n1"});
  v1::Run shrunk = f.Get(run);
  REQUIRE(shrunk.status() == v1::RUN_STATUS_STARTING);
  REQUIRE(shrunk.nodes_size() == 1);
  CHECK(shrunk.nodes(0).node_name() == "n1");
  CHECK(f.Events(run, v1::RUN_EVENT_TYPE_RESIZED) ==
        std::vector<std::string>{
            "Resumed on 1 of its 2 nodes (compute.min_nodes is 1): not all of them came free "
            "within 30s of its requeue; it grows back after a checkpoint once they are"});
  // Its one node is told a world of one node's ranks.
  const auto starts = f.Starts(before);
  REQUIRE(starts.size() == 1);
  CHECK(starts[0].first == "n1");
  CHECK(starts[0].second.num_nodes() == 1);
  CHECK(starts[0].second.world_size() == 8);
  CHECK(f.Get(run).retries_used() == 1);  // the node failure's; shrinking uses none

  // n2 comes back while the run trains on n1: nothing happens until a new checkpoint.
  f.Update("n1", run, 1, v1::ATTEMPT_PHASE_STARTED);
  f.n1_attempt = 1;
  f.Register("n2");
  f.Progress(run, 1, 15, 10);
  CHECK(f.Second({"n1", "n2"}).resized == 0);
  CHECK(f.Second({"n1", "n2"}).resized == 0);
  const size_t before_stop = f.sent.size();
  f.Progress(run, 1, 21, 20);
  CHECK(f.Second({"n1", "n2"}).resized == 1);
  bool stop_sent = false;
  for (size_t i = before_stop; i < f.sent.size(); ++i) {
    stop_sent = stop_sent || (f.sent[i].first == "n1" && f.sent[i].second.has_stop_attempt());
  }
  CHECK(stop_sent);
  CHECK(f.Second({"n1", "n2"}).resized == 0);  // asked once

  // Its ranks exit: requeued without a retry, and placed on both nodes.
  f.Update("n1", run, 1, v1::ATTEMPT_PHASE_FINISHED);
  f.n1_attempt = -1;
  v1::Run requeued = f.Get(run);
  CHECK(requeued.resumption_index() == 2);
  CHECK(requeued.retries_used() == 1);
  auto attempts = f.stores.runs->ListAttempts(run.id());
  REQUIRE(attempts.ok());
  bool resized = false;
  for (const auto& a : *attempts) {
    resized =
        resized || (a.resumption_index() == 1 && a.end_reason() == v1::ATTEMPT_END_REASON_RESIZED);
  }
  CHECK(resized);
  const auto events = f.Events(run, v1::RUN_EVENT_TYPE_RESIZED);
  REQUIRE(events.size() == 2);
  CHECK(events[1] ==
        "Run was stopped to resize: all 2 of its nodes are free again; stopped right after its "
        "checkpoint of step 20 to resume on all of them");
  f.Second({"n1", "n2"});
  v1::Run grown = f.Get(run);
  CHECK(grown.status() == v1::RUN_STATUS_STARTING);
  CHECK(grown.nodes_size() == 2);
  CHECK(f.Events(run, v1::RUN_EVENT_TYPE_RESIZED).size() == 2);  // all of them: no note
}

TEST_CASE("a run that accepts no fewer nodes keeps waiting for all of them") {
  ResizeFixture f;
  const v1::Run run = f.Submit(16, /*retry=*/true);
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  f.Update("n1", run, 0, v1::ATTEMPT_PHASE_STARTED);
  f.Update("n2", run, 0, v1::ATTEMPT_PHASE_STARTED);
  for (int i = 0; i < 3; ++i) f.Second({"n1"});
  f.Update("n1", run, 0, v1::ATTEMPT_PHASE_FINISHED);
  for (int i = 0; i < 40; ++i) f.Second({"n1"});
  CHECK(f.Get(run).status() == v1::RUN_STATUS_QUEUED);
  CHECK(f.Events(run, v1::RUN_EVENT_TYPE_RESIZED).empty());
}

}  // namespace run_resizing_test
}  // namespace tessera::scheduler
