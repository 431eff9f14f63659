// ValidateRunSpec on specs built in code (as they arrive over gRPC).

#include <google/protobuf/util/message_differencer.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "runspec/run_spec_parser.h"

namespace run_spec_validate_test {

using tessera::spec::ParseRunSpec;
using tessera::spec::RunSpecToYaml;
using tessera::spec::ValidateRunSpec;
using tessera::v1::RunSpec;

RunSpec ValidSpec() {
  RunSpec spec;
  spec.set_name("resnet-50");
  spec.set_image("pytorch/pytorch:latest");
  spec.set_command("python train.py --epochs 3");
  auto* compute = spec.mutable_compute();
  compute->set_gpus(8);
  compute->set_nodes(2);
  compute->add_node_names("gpu-01");
  compute->add_node_names("gpu-02");
  compute->set_gpu_type("a100");
  auto* scheduling = spec.mutable_scheduling();
  scheduling->set_priority(tessera::v1::PRIORITY_LOW);
  scheduling->set_retry_on_system_failure(true);
  scheduling->set_max_retries(3);
  scheduling->add_retry_on_exit_codes(134);
  scheduling->set_max_duration_hours(1.5);
  auto* env = spec.add_env_variables();
  env->set_key("DATA_DIR");
  env->set_value("/data");
  (*spec.mutable_parameters()->mutable_fields())["epochs"].set_number_value(3);
  (*spec.mutable_metadata())["owner"] = "vision";
  auto* integration = spec.add_integrations();
  integration->set_integration_type("git_repo");
  (*integration->mutable_fields()->mutable_fields())["git_repo"].set_string_value("org/repo");
  return spec;
}

TEST_CASE("a valid programmatic spec passes and round trips", "[run_spec]") {
  const RunSpec spec = ValidSpec();
  REQUIRE(ValidateRunSpec(spec).ok());
  const std::string yaml = RunSpecToYaml(spec);
  INFO(yaml);
  const absl::StatusOr<RunSpec> parsed = ParseRunSpec(yaml);
  INFO(parsed.status().ToString());
  REQUIRE(parsed.ok());
  CHECK(google::protobuf::util::MessageDifferencer::Equals(spec, *parsed));
}

TEST_CASE("an unspecified priority is valid (it means medium)", "[run_spec]") {
  RunSpec spec = ValidSpec();
  spec.mutable_scheduling()->set_priority(tessera::v1::PRIORITY_UNSPECIFIED);
  CHECK(ValidateRunSpec(spec).ok());
  CHECK(ValidateRunSpec(RunSpec()).code() == absl::StatusCode::kInvalidArgument);
}

struct Breakage {
  const char* label;
  std::function<void(RunSpec&)> mutate;
  const char* message;  // the whole expected message, "path: text"
};

TEST_CASE("ValidateRunSpec reports the broken field by path, without a line", "[run_spec]") {
  const double kInf = std::numeric_limits<double>::infinity();
  const Breakage breakages[] = {
      {"no name", [](RunSpec& s) { s.clear_name(); }, "name: required field is missing or empty"},
      {"bad name", [](RunSpec& s) { s.set_name("Res_Net"); }, "name: \"Res_Net\""},
      {"no command", [](RunSpec& s) { s.clear_command(); },
       "command: required field is missing or empty"},
      {"blank command", [](RunSpec& s) { s.set_command(" \t\n"); },
       "command: must not be empty or only whitespace"},
      {"NUL in command", [](RunSpec& s) { s.set_command(std::string("a\0b", 3)); },
       "command: must not contain a NUL character"},
      {"negative gpus", [](RunSpec& s) { s.mutable_compute()->set_gpus(-1); },
       "compute.gpus: must be a non-negative integer, got -1"},
      {"negative nodes", [](RunSpec& s) { s.mutable_compute()->set_nodes(-2); },
       "compute.nodes: must be a positive integer, got -2"},
      {"indivisible gpus", [](RunSpec& s) { s.mutable_compute()->set_gpus(7); },
       "compute.gpus: 7 GPUs cannot be spread evenly over compute.nodes = 2 nodes"},
      {"node count", [](RunSpec& s) { s.mutable_compute()->add_node_names("gpu-03"); },
       "compute.node_names: has 3 node name(s) but compute.nodes is 2"},
      {"duplicate node", [](RunSpec& s) { s.mutable_compute()->set_node_names(1, "gpu-01"); },
       "compute.node_names[1]: duplicate node name \"gpu-01\""},
      {"empty node name", [](RunSpec& s) { s.mutable_compute()->set_node_names(0, ""); },
       "compute.node_names[0]: a node name must not be empty"},
      {"unknown priority",
       [](RunSpec& s) {
         s.mutable_scheduling()->set_priority(static_cast<tessera::v1::Priority>(9));
       },
       "scheduling.priority: unknown priority 9"},
      {"too many retries", [](RunSpec& s) { s.mutable_scheduling()->set_max_retries(1001); },
       "scheduling.max_retries: must be an integer between 0 and 1000, got 1001"},
      {"an exit code out of range",
       [](RunSpec& s) {
         s.mutable_scheduling()->clear_retry_on_exit_codes();
         s.mutable_scheduling()->add_retry_on_exit_codes(1);
         s.mutable_scheduling()->add_retry_on_exit_codes(256);
       },
       "scheduling.retry_on_exit_codes[1]: must be an exit code from 1 to 255 (a signal N is "
       "128 + N), got 256"},
      {"negative duration", [](RunSpec& s) { s.mutable_scheduling()->set_max_duration_hours(-1); },
       "scheduling.max_duration: must be a positive number of hours"},
      {"infinite hang timeout",
       [kInf](RunSpec& s) { s.mutable_scheduling()->set_hang_timeout_seconds(kInf); },
       "scheduling.hang_timeout: must be a positive number of seconds"},
      {"mfu of 1", [](RunSpec& s) { s.mutable_scheduling()->set_mfu_threshold(1); },
       "scheduling.mfu_threshold: must be a number between 0 and 1 (exclusive), got 1"},
      {"mfu nan", [](RunSpec& s) { s.mutable_scheduling()->set_mfu_threshold(std::nan("")); },
       "scheduling.mfu_threshold: must be a number between 0 and 1"},
      {"empty env key", [](RunSpec& s) { s.add_env_variables()->set_value("x"); },
       "env_variables[1].key: required field is missing or empty"},
      {"reserved env key", [](RunSpec& s) { s.mutable_env_variables(0)->set_key("MASTER_PORT"); },
       "env_variables[0].key: \"MASTER_PORT\" is set by the platform"},
      {"bad env key", [](RunSpec& s) { s.mutable_env_variables(0)->set_key("A B"); },
       "env_variables[0].key: \"A B\" is not a valid environment variable name"},
      {"duplicate env key", [](RunSpec& s) { *s.add_env_variables() = s.env_variables(0); },
       "env_variables[1].key: duplicate environment variable \"DATA_DIR\" (also env_variables[0])"},
      {"NUL in env value",
       [](RunSpec& s) { s.mutable_env_variables(0)->set_value(std::string("\0", 1)); },
       "env_variables[0].value: must not contain a NUL character"},
      {"non-finite parameter",
       [kInf](RunSpec& s) {
         auto& lr = (*s.mutable_parameters()->mutable_fields())["opt"];
         (*lr.mutable_struct_value()->mutable_fields())["lr"].set_number_value(-kInf);
       },
       "parameters.opt.lr: must be a finite number, got -inf"},
      {"deep parameters",
       [](RunSpec& s) {
         google::protobuf::Value* v = &(*s.mutable_parameters()->mutable_fields())["d"];
         for (int i = 0; i < 70; ++i) v = v->mutable_list_value()->add_values();
       },
       "parameters.d[0][0][0]"},
      {"invalid UTF-8 image", [](RunSpec& s) { s.set_image("\xc3"); },
       "image: text is not valid UTF-8"},
      {"noncharacter in a parameter",
       [](RunSpec& s) {
         (*s.mutable_parameters()->mutable_fields())["s"].set_string_value("x\xef\xbf\xbf");
       },
       "parameters.s: text contains U+FFFF, a Unicode noncharacter"},
      {"invalid UTF-8 metadata value", [](RunSpec& s) { (*s.mutable_metadata())["k"] = "\xff"; },
       "metadata.k: text is not valid UTF-8"},
      {"empty metadata key", [](RunSpec& s) { (*s.mutable_metadata())[""] = "x"; },
       "metadata.\"\": keys must not be empty"},
      {"integration without type",
       [](RunSpec& s) { s.mutable_integrations(0)->clear_integration_type(); },
       "integrations[0].integration_type: required field is missing or empty"},
      {"integration type twice",
       [](RunSpec& s) {
         (*s.mutable_integrations(0)->mutable_fields()->mutable_fields())["integration_type"]
             .set_string_value("pip");
       },
       "integrations[0].integration_type: is given twice"},
  };
  for (const Breakage& breakage : breakages) {
    INFO(breakage.label);
    RunSpec spec = ValidSpec();
    breakage.mutate(spec);
    const absl::Status status = ValidateRunSpec(spec);
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StartsWith(status.message(), breakage.message));
    CHECK_FALSE(absl::StrContains(status.message(), "line "));
  }
}

TEST_CASE("a rule broken in YAML and in code gives the same message", "[run_spec]") {
  RunSpec spec = ValidSpec();
  spec.mutable_compute()->set_gpus(-4);
  const std::string from_code(ValidateRunSpec(spec).message());
  const auto parsed = ParseRunSpec(RunSpecToYaml(spec));
  REQUIRE_FALSE(parsed.ok());
  const std::string from_yaml(parsed.status().message());
  INFO(from_yaml);
  CHECK(absl::EndsWith(from_yaml, ": " + from_code));
}

}  // namespace run_spec_validate_test
