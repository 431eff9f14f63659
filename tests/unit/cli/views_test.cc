// What runs and nodes look like to a person: tables, describe pages, follow lines.

#include <catch2/catch.hpp>
#include <sstream>

#include "cli/node_view.h"
#include "cli/run_view.h"

namespace views_test {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

tessera::v1::Run MakeRun(const std::string& name, tessera::v1::RunStatus status) {
  tessera::v1::Run run;
  run.set_name(name);
  run.set_user("alice");
  run.set_status(status);
  run.set_resumption_index(-1);
  run.mutable_spec()->set_name(name);
  run.mutable_spec()->set_command("python train.py");
  run.mutable_spec()->mutable_compute()->set_cluster("c1");
  run.mutable_spec()->mutable_compute()->set_gpus(8);
  run.mutable_spec()->mutable_scheduling()->set_priority(tessera::v1::PRIORITY_MEDIUM);
  return run;
}

TEST_CASE("progress shows steps and percent", "[cli][views]") {
  tessera::v1::RunProgress progress;
  CHECK(tessera::cli::FormatProgress(progress) == "-");
  progress.set_step(120);
  CHECK(tessera::cli::FormatProgress(progress) == "120");
  progress.set_total_steps(1000);
  CHECK(tessera::cli::FormatProgress(progress) == "120/1000 (12%)");
}

TEST_CASE("the runs table has mcli's columns", "[cli][views]") {
  google::protobuf::RepeatedPtrField<tessera::v1::Run> runs;
  *runs.Add() = MakeRun("train-a", tessera::v1::RUN_STATUS_RUNNING);
  auto& second = *runs.Add() = MakeRun("train-bb", tessera::v1::RUN_STATUS_QUEUED);
  second.set_resumption_index(1);
  second.mutable_progress()->set_step(5);
  second.mutable_progress()->set_total_steps(10);
  std::ostringstream out;
  tessera::cli::PrintRunTable(out, runs);
  const auto lines = Lines(out.str());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "NAME      USER   CLUSTER  GPUS  STATUS   RESUMPTION  PROGRESS    CREATED");
  CHECK(lines[1] == "train-a   alice  c1       8     RUNNING  -           -           -");
  CHECK(lines[2] == "train-bb  alice  c1       8     QUEUED   1           5/10 (50%)  -");
}

TEST_CASE("describe run shows attempts, reasons and events", "[cli][views]") {
  tessera::v1::RunDescription description;
  *description.mutable_run() = MakeRun("train-a", tessera::v1::RUN_STATUS_RUNNING);
  description.mutable_run()->set_pending_seconds(65);
  auto* attempt = description.add_attempts();
  attempt->set_resumption_index(0);
  attempt->set_status(tessera::v1::RUN_STATUS_FAILED);
  attempt->add_nodes()->set_node_name("node-a");
  attempt->add_nodes()->set_node_name("node-b");
  attempt->set_end_reason(tessera::v1::ATTEMPT_END_REASON_GPU_FAULT);
  attempt->set_reason("XID 79 on GPU 3");
  attempt->set_first_failed_rank(3);
  attempt->set_first_failed_node("node-b");
  auto* event = description.add_events();
  event->set_type(tessera::v1::RUN_EVENT_TYPE_REQUEUED);
  event->set_message("Run was placed back in the scheduling queue");
  std::ostringstream out;
  tessera::cli::PrintRunDescription(out, description);
  const std::string text = out.str();
  INFO(text);
  CHECK_THAT(text, Catch::Contains("Run:") && Catch::Contains("train-a"));
  CHECK_THAT(text, Catch::Contains("Pending time:") && Catch::Contains("1m 5s"));
  CHECK_THAT(text, Catch::Contains("node-a,node-b"));
  CHECK_THAT(text, Catch::Contains("GPU_FAULT: XID 79 on GPU 3: first failure: rank 3 on node-b"));
  CHECK_THAT(text, Catch::Contains("REQUEUED") &&
                       Catch::Contains("Run was placed back in the scheduling queue"));
  CHECK_THAT(text, Catch::Contains("Run spec:") && Catch::Contains("python train.py"));
}

TEST_CASE("describe run shows what each interruption cost, in parts, and the rollbacks",
          "[cli][views]") {
  tessera::v1::RunDescription description;
  *description.mutable_run() = MakeRun("train-a", tessera::v1::RUN_STATUS_RUNNING);
  auto* progress = description.mutable_run()->mutable_progress();
  progress->set_loss_rollbacks(2);
  progress->mutable_last_loss_rollback()->set_number(2);
  progress->mutable_last_loss_rollback()->set_bad_step(140);
  progress->mutable_last_loss_rollback()->set_reason("the loss is nan");
  auto* it = description.add_interruptions();
  it->set_cause(tessera::v1::ATTEMPT_END_REASON_NODE_FAILURE);
  it->set_seconds_lost(80);
  it->set_detection_seconds(15);
  it->set_downtime_seconds(5);
  it->set_restart_seconds(10);
  it->set_rework_seconds(50);
  it->set_rework_steps(50);
  auto* ongoing = description.add_interruptions();
  ongoing->set_resumption_index(1);
  ongoing->set_cause(tessera::v1::ATTEMPT_END_REASON_HANG);
  ongoing->set_seconds_lost(30);
  ongoing->set_detection_seconds(30);
  ongoing->set_ongoing(true);
  (*description.mutable_seconds_lost_by_cause())["NODE_FAILURE"] = 80;
  (*description.mutable_seconds_lost_by_cause())["HANG"] = 30;
  description.set_cluster_goodput(0.931);
  auto* advice = description.mutable_checkpoint_advice();
  advice->set_save_seconds(0.4);
  advice->set_interval_steps(25);
  advice->set_interval_seconds(12);
  advice->set_advised_interval_steps(3000);
  advice->set_advised_interval_seconds(1500);
  advice->set_expected_loss_now(0.034);
  advice->set_expected_loss_advised(0.002);
  advice->set_interruptions(3);
  advice->set_gpu_hours(1200);
  advice->set_window_days(7);
  advice->set_mean_seconds_between_interruptions(360000);
  std::ostringstream out;
  tessera::cli::PrintRunDescription(out, description);
  const std::string text = out.str();
  INFO(text);
  CHECK_THAT(text, Catch::Contains("notice 15s, wait 5s, restart 10s, redo 50s (50 steps)"));
  CHECK_THAT(text, Catch::Contains("30s+"));  // still being recovered from
  CHECK_THAT(text, Catch::Contains("Lost by cause: NODE_FAILURE 1m 20s, HANG 30s"));
  CHECK_THAT(text, Catch::Contains("Cluster goodput:") && Catch::Contains("93.1%"));
  CHECK_THAT(text, Catch::Contains("every 25 steps (12s), 0.4s a save; advised: every 3000 steps "
                                   "(25m), expected loss 0.2% instead of 3.4%, from 3 hardware "
                                   "interruption(s) in 1200 GPU-hours over 7 days (one per 4d "
                                   "4h for this run's GPUs)"));
  CHECK_THAT(text, Catch::Contains("Loss rollbacks:") &&
                       Catch::Contains("2, the last at step 140 (the loss is nan)"));
}

TEST_CASE("follow lines show the status and the event", "[cli][views]") {
  tessera::v1::RunChange change;
  *change.mutable_run() = MakeRun("train-a", tessera::v1::RUN_STATUS_RUNNING);
  change.mutable_event()->set_type(tessera::v1::RUN_EVENT_TYPE_STARTED);
  change.mutable_event()->set_message("Run started");
  CHECK(tessera::cli::FormatRunChange(change) == "-  RUNNING      Run started");
}

TEST_CASE("node events stream as fixed-width lines", "[cli][views]") {
  tessera::v1::NodeEvent event;
  event.set_node_name("node-a");
  event.set_type(tessera::v1::NODE_EVENT_TYPE_CORDONED);
  event.mutable_actor()->set_name("health-api");
  event.set_reason("busbw 12 GB/s, peers 180 GB/s");
  const std::string header = tessera::cli::NodeEventStreamHeader();
  const std::string line = tessera::cli::FormatNodeEventLine(event);
  CHECK(header.find("NODE") == line.find("node-a"));
  CHECK(header.find("EVENT") == line.find("CORDONED"));
  CHECK(header.find("REASON") == line.find("busbw"));
}

TEST_CASE("the nodes table", "[cli][views]") {
  google::protobuf::RepeatedPtrField<tessera::v1::Node> nodes;
  auto& node = *nodes.Add();
  node.set_name("node-a");
  node.set_cluster("c1");
  node.set_gpu_type("h100");
  node.set_gpu_count(8);
  node.set_liveness(tessera::v1::NODE_LIVENESS_ONLINE);
  node.set_admin_state(tessera::v1::NODE_ADMIN_STATE_CORDONED);
  node.set_health(tessera::v1::NODE_HEALTH_UNHEALTHY);
  node.set_status_reason("XID 79");
  std::ostringstream out;
  tessera::cli::PrintNodeTable(out, nodes);
  const auto lines = Lines(out.str());
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "NAME    CLUSTER  GPU TYPE  GPUS  LIVENESS  STATE     HEALTH     REASON");
  CHECK(lines[1] == "node-a  c1       h100      8     ONLINE    CORDONED  UNHEALTHY  XID 79");
}

}  // namespace views_test
