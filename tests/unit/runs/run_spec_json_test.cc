// The run spec as JSON (REST bodies): the same values and forms as the YAML, protobuf's JSON
// forms of the spec back, and errors that name the field.
#include <google/protobuf/util/json_util.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "runspec/run_spec_parser.h"
#include "tests/unit/runs/run_spec_test_helpers.h"

namespace run_spec_json_test {

using namespace tessera::spec::testing;  // NOLINT: the helpers of these tests
using tessera::spec::ParseRunSpec;
using tessera::spec::ParseRunSpecJson;
using tessera::spec::RunSpecToYaml;

TEST_CASE("JSON takes compute.min_nodes in both spellings", "[run_spec][json]") {
  CHECK(MustParseJson(R"({"name": "a", "command": "x", "compute": {"nodes": 4, "min_nodes": 2}})")
            .spec.compute()
            .min_nodes() == 2);
  CHECK(MustParseJson(R"({"name": "a", "command": "x", "compute": {"nodes": 4, "minNodes": 3}})")
            .spec.compute()
            .min_nodes() == 3);
}

TEST_CASE("JSON takes the YAML's values and forms", "[run_spec][mcli][json]") {
  const Parsed p = MustParseJson(R"({"name": "My_Run", "command": "python train.py",
      "compute": {"gpus": 8, "gpu_type": "h100"},
      "scheduling": {"priority": "low", "max_duration": 1.5, "preemptible": true},
      "env_variables": {"A": "1", "B": 2},
      "metadata": {"tags": ["x"]},
      "integrations": [{"integration_type": "git_repo", "git_repo": "org/repo"}]})");
  CHECK(p.spec.name() == "my-run");
  CHECK(p.spec.scheduling().priority() == tessera::v1::PRIORITY_LOW);
  CHECK(p.spec.scheduling().max_duration_hours() == 1.5);
  CHECK(p.spec.scheduling().preemptible());
  REQUIRE(p.spec.env_variables_size() == 2);
  CHECK(p.spec.env_variables(1).value() == "2");
  CHECK(p.spec.metadata().at("tags") == R"(["x"])");
  CHECK(p.spec.integrations(0).fields().fields().at("git_repo").string_value() == "org/repo");
  CHECK(p.HasNote("name: \"My_Run\" changed to \"my-run\""));

  for (const char* priority : {"LOW", "Low", "PRIORITY_LOW", "priority_low"}) {
    INFO(priority);
    const Parsed q =
        MustParseJson(std::string(R"({"name": "a", "command": "x", "scheduling": {"priority": ")") +
                      priority + "\"}}");
    CHECK(q.spec.scheduling().priority() == tessera::v1::PRIORITY_LOW);
  }
  const Parsed older = MustParseJson(R"({"run_name": "a", "command": "x", "gpu_num": 4})");
  CHECK(older.spec.name() == "a");
  CHECK(older.spec.compute().gpus() == 4);
  CHECK(older.HasNote("gpu_num: read as compute.gpus"));
}

TEST_CASE("JSON also takes protobuf's JSON forms of the spec back", "[run_spec][mcli][json]") {
  RunSpec spec;
  spec.set_name("resnet-50");
  spec.set_image("pytorch/pytorch:latest");
  spec.set_command("python train.py\necho done \xf0\x9f\x8e\x89\n");
  spec.mutable_compute()->set_gpus(16);
  spec.mutable_compute()->set_nodes(2);
  spec.mutable_compute()->set_gpu_type("a100");
  spec.mutable_compute()->add_node_names("gpu-01");
  spec.mutable_compute()->add_node_names("gpu-02");
  auto* scheduling = spec.mutable_scheduling();
  scheduling->set_priority(tessera::v1::PRIORITY_HIGH);
  scheduling->set_retry_on_system_failure(false);
  scheduling->set_max_retries(0);
  scheduling->set_max_duration_hours(2.5);
  scheduling->set_hang_timeout_seconds(600);
  auto* env = spec.add_env_variables();
  env->set_key("DATA_DIR");
  env->set_value("/data");
  (*spec.mutable_parameters()->mutable_fields())["lr"].set_number_value(3e-4);
  (*spec.mutable_metadata())["owner"] = "vision";
  auto* git = spec.add_integrations();
  git->set_integration_type("git_repo");
  (*git->mutable_fields()->mutable_fields())["git_repo"].set_string_value("org/repo");
  spec.add_integrations()->set_integration_type("pip");

  for (const bool proto_names : {true, false}) {
    for (const bool defaults : {true, false}) {
      google::protobuf::util::JsonPrintOptions options;
      options.preserve_proto_field_names = proto_names;  // else lowerCamelCase
      options.always_print_primitive_fields = defaults;  // 0, "", false and [] printed
      std::string json;
      REQUIRE(google::protobuf::util::MessageToJsonString(spec, &json, options).ok());
      INFO(json);
      const Parsed p = MustParseJson(json);
      CheckEqual(spec, p.spec);
      CHECK(p.notes.empty());
    }
  }
}

TEST_CASE("JSON's other protobuf forms: numbers as strings, enum numbers", "[run_spec][json]") {
  const Parsed p = MustParseJson(R"({"name": "a", "command": "x",
      "compute": {"gpus": "8", "nodes": "2"},
      "scheduling": {"priority": 2, "maxDurationHours": "1.5", "max_retries": "3"}})");
  CHECK(p.spec.compute().gpus() == 8);
  CHECK(p.spec.compute().nodes() == 2);
  CHECK(p.spec.scheduling().priority() == tessera::v1::PRIORITY_LOW);
  CHECK(p.spec.scheduling().max_duration_hours() == 1.5);
  CHECK(p.spec.scheduling().max_retries() == 3);
  const Parsed unspecified = MustParseJson(
      R"({"name": "a", "command": "x", "scheduling": {"priority": "PRIORITY_UNSPECIFIED"}})");
  CHECK(unspecified.spec.scheduling().priority() == tessera::v1::PRIORITY_MEDIUM);
}

TEST_CASE("JSON errors name the field, without a position", "[run_spec][json]") {
  CHECK(JsonError(R"({"name": "a", "command": "x", "scheduling": {"priority": "urgent"}})") ==
        "scheduling.priority: must be one of high, medium, low, lowest, auto (in any case; "
        "PRIORITY_LOW and the like too), got \"urgent\"");
  CHECK(absl::StartsWith(JsonError(R"({"nmae": "x"})"), "unknown field \"nmae\""));
  CHECK(absl::StrContains(JsonError(R"({"nmae": "x"})"), "did you mean \"name\""));
  CHECK(JsonError(R"({"name": "a", "command": "x", "compute": {"gpus": -4}})") ==
        "compute.gpus: must be a non-negative integer, got -4");
  CHECK(JsonError(R"({"name": "a", "command": "x", "scheduling": {"preemptible": "yes"}})") ==
        "scheduling.preemptible: must be true or false, got \"yes\"");
  CHECK(JsonError(R"({"command": "x"})") == "name: required field is missing or empty");
  CHECK(JsonError(R"({"name": "a", "command": "x", "gpu_num": 6, "compute": {"nodes": 4}})") ==
        "gpu_num (read as compute.gpus): 6 GPUs cannot be spread evenly over compute.nodes = 4 "
        "nodes (compute.gpus must be a multiple of compute.nodes)");
  CHECK(
      JsonError(
          R"({"name": "a", "command": "x", "scheduling": {"max_duration": 1, "max_duration_hours": 2}})") ==
      "scheduling.max_duration_hours: is given twice (also as scheduling.max_duration); give "
      "one of them");
  CHECK(absl::StartsWith(JsonError(R"({"name": )"), "not valid JSON"));
  CHECK(absl::StartsWith(JsonError("[1, 2]"), "the run spec must be a JSON object"));
  CHECK(absl::StartsWith(JsonError("{}"), "name: required"));
}

// --- Specs from gRPC ---------------------------------------------------------------------------

}  // namespace run_spec_json_test
