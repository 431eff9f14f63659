// The StartAttempt command: each rank's place in the job, and how many ranks a node runs.
#include "scheduler/service/start_message.h"

#include <catch2/catch.hpp>

namespace tessera::scheduler {
namespace start_message_test {

TEST_CASE("ranks on a node: one per GPU, else the run's procs_per_node, else the node's label") {
  v1::Run run;
  v1::AttemptNode gpus;
  gpus.set_node_name("g");
  gpus.add_gpu_indices(2);
  gpus.add_gpu_indices(3);
  v1::AttemptNode cpu;
  cpu.set_node_name("c");
  v1::Node labelled;
  labelled.set_name("c");
  (*labelled.mutable_labels())[std::string(kProcsPerNodeLabel)] = "4";
  std::map<std::string, const v1::Node*> inventory{{"c", &labelled}};

  CHECK(RanksOnNode(run, gpus, inventory) == 2);
  CHECK(RanksOnNode(run, cpu, inventory) == 4);
  CHECK(RanksOnNode(run, cpu, {}) == 1);
  (*labelled.mutable_labels())[std::string(kProcsPerNodeLabel)] = "many";
  CHECK(RanksOnNode(run, cpu, inventory) == 1);  // an unreadable label counts as none
  run.mutable_spec()->mutable_compute()->set_procs_per_node(3);
  CHECK(RanksOnNode(run, cpu, inventory) == 3);
  CHECK(RanksOnNode(run, gpus, inventory) == 2);
}

TEST_CASE("start command: the run contract's numbers and the run's command and parameters") {
  v1::Run run;
  run.set_id("id-1");
  run.set_name("train");
  run.mutable_spec()->set_command("python train.py");
  auto* env = run.mutable_spec()->add_env_variables();
  env->set_key("A");
  env->set_value("1");
  run.mutable_spec()->mutable_scheduling()->set_hang_timeout_seconds(120);
  v1::Attempt attempt;
  attempt.set_resumption_index(2);
  attempt.set_master_addr("10.0.0.1");
  attempt.set_master_port(29555);
  attempt.add_nodes()->set_node_name("a");
  v1::AttemptNode* node = attempt.add_nodes();
  node->set_node_name("b");
  node->set_node_rank(1);
  node->add_gpu_indices(5);

  const v1::StartAttempt s =
      StartCommand(run, attempt, *node, /*world_size=*/9, /*local_size=*/1,
                   /*first_rank=*/8, SchedulerConfig{.stop_grace = absl::Seconds(7)});
  CHECK(s.run_id() == "id-1");
  CHECK(s.run_name() == "train");
  CHECK(s.resumption_index() == 2);
  CHECK(s.command() == "python train.py");
  CHECK(s.env().at("A") == "1");
  CHECK(s.parameters_json() == "{}");  // no parameters: an empty object, never nothing
  CHECK(s.node_rank() == 1);
  CHECK(s.num_nodes() == 2);
  CHECK(s.world_size() == 9);
  CHECK(s.first_rank() == 8);
  CHECK(s.local_world_size() == 1);
  CHECK(s.master_addr() == "10.0.0.1");
  CHECK(s.master_port() == 29555);
  REQUIRE(s.gpu_indices_size() == 1);
  CHECK(s.gpu_indices(0) == 5);
  CHECK(s.stop_grace_period().seconds() == 7);
  CHECK(s.hang_timeout_seconds() == 120);
}

TEST_CASE("start command: parameters travel as JSON with the user's field names") {
  v1::Run run;
  auto& fields = *run.mutable_spec()->mutable_parameters()->mutable_fields();
  fields["max_steps"].set_number_value(10);
  v1::Attempt attempt;
  attempt.add_nodes()->set_node_name("a");
  const v1::StartAttempt s = StartCommand(run, attempt, attempt.nodes(0), 1, 1, 0, {});
  CHECK(s.parameters_json() == "{\"max_steps\":10}");
}

}  // namespace start_message_test
}  // namespace tessera::scheduler
