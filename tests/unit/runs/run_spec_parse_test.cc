// ParseRunSpec on valid run YAML, and RunSpecToYaml round trips.

#include <google/protobuf/util/message_differencer.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "runspec/run_spec_parser.h"

namespace run_spec_parse_test {

using google::protobuf::util::MessageDifferencer;
using tessera::spec::ParseRunSpec;
using tessera::spec::RunSpecToYaml;
using tessera::v1::RunSpec;

constexpr const char* kFullSpec = R"(# A complete run, every field set.
name: llama-7b-pretrain
image: mosaicml/pytorch:2.1.0_cu121-python3.10-ubuntu20.04
command: |
  cd /workspace
  composer train.py /mnt/config/parameters.yaml
secrets: [hf, wandb]
compute:
  cluster: r1z1
  gpus: 16
  gpu_type: h100_80gb
  nodes: 2
  node_names: [node-a, node-b]
  instance: oci.bm.gpu.h100.8
  procs_per_node: 8
scheduling:
  priority: High
  preemptible: true
  retry_on_system_failure: false
  max_retries: 5
  retry_on_exit_codes: [1, 134]
  max_duration: 12.5
  hang_timeout: 600
  mfu_threshold: 0.25
env_variables:
  WANDB_PROJECT: llama
  NCCL_DEBUG: INFO
  SEED: 17
parameters:
  model:
    name: llama
    n_layers: 32
    dropout: 0.1
    tied: false
    vocab: ~
  lr: 3.0e-4
  steps: 0x10
  tags: [a, "1", 2, null]
  note: "true"
  empty: {}
metadata:
  team: research
  version: 2
integrations:
  - integration_type: git_repo
    git_repo: org/repo
    git_branch: main
    ssh_clone: true
  - integration_type: wandb
    project: llama
)";

RunSpec MustParse(const std::string& yaml) {
  absl::StatusOr<RunSpec> spec = ParseRunSpec(yaml);
  INFO(yaml);
  INFO(spec.status().ToString());
  REQUIRE(spec.ok());
  return *spec;
}

const google::protobuf::Value& Field(const google::protobuf::Struct& s, const std::string& key) {
  const auto it = s.fields().find(key);
  REQUIRE(it != s.fields().end());
  return it->second;
}

void RequireRoundTrip(const RunSpec& spec) {
  const std::string yaml = RunSpecToYaml(spec);
  INFO("emitted:\n" << yaml);
  absl::StatusOr<RunSpec> again = ParseRunSpec(yaml);
  INFO(again.status().ToString());
  REQUIRE(again.ok());
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  const bool equal = differencer.Compare(spec, *again);
  INFO("differences: " << diff);
  CHECK(equal);
}

TEST_CASE("a full run spec parses with every field", "[run_spec]") {
  const RunSpec spec = MustParse(kFullSpec);

  CHECK(spec.name() == "llama-7b-pretrain");
  CHECK(spec.image() == "mosaicml/pytorch:2.1.0_cu121-python3.10-ubuntu20.04");
  CHECK(spec.command() == "cd /workspace\ncomposer train.py /mnt/config/parameters.yaml\n");

  const auto& compute = spec.compute();
  CHECK(compute.cluster() == "r1z1");
  CHECK(compute.gpus() == 16);
  CHECK(compute.gpu_type() == "h100_80gb");
  CHECK(compute.nodes() == 2);
  REQUIRE(compute.node_names_size() == 2);
  CHECK(compute.node_names(0) == "node-a");
  CHECK(compute.node_names(1) == "node-b");
  CHECK(compute.instance() == "oci.bm.gpu.h100.8");
  CHECK(compute.procs_per_node() == 8);

  const auto& scheduling = spec.scheduling();
  CHECK(scheduling.priority() == tessera::v1::PRIORITY_HIGH);
  CHECK(scheduling.preemptible());
  REQUIRE(scheduling.has_retry_on_system_failure());
  CHECK_FALSE(scheduling.retry_on_system_failure());
  REQUIRE(scheduling.has_max_retries());
  CHECK(scheduling.max_retries() == 5);
  REQUIRE(scheduling.retry_on_exit_codes_size() == 2);
  CHECK(scheduling.retry_on_exit_codes(1) == 134);
  CHECK(scheduling.max_duration_hours() == 12.5);
  CHECK(scheduling.hang_timeout_seconds() == 600);
  CHECK(scheduling.mfu_threshold() == 0.25);

  REQUIRE(spec.env_variables_size() == 3);
  CHECK(spec.env_variables(0).key() == "WANDB_PROJECT");
  CHECK(spec.env_variables(0).value() == "llama");
  CHECK(spec.env_variables(1).key() == "NCCL_DEBUG");
  CHECK(spec.env_variables(2).key() == "SEED");
  CHECK(spec.env_variables(2).value() == "17");

  const auto& params = spec.parameters();
  const auto& model = Field(params, "model").struct_value();
  CHECK(Field(model, "name").string_value() == "llama");
  CHECK(Field(model, "n_layers").number_value() == 32);
  CHECK(Field(model, "dropout").number_value() == 0.1);
  CHECK(Field(model, "tied").kind_case() == google::protobuf::Value::kBoolValue);
  CHECK_FALSE(Field(model, "tied").bool_value());
  CHECK(Field(model, "vocab").kind_case() == google::protobuf::Value::kNullValue);
  CHECK(Field(params, "lr").number_value() == 3.0e-4);
  CHECK(Field(params, "steps").number_value() == 16);
  const auto& tags = Field(params, "tags").list_value();
  REQUIRE(tags.values_size() == 4);
  CHECK(tags.values(0).string_value() == "a");
  CHECK(tags.values(1).string_value() == "1");
  CHECK(tags.values(2).number_value() == 2);
  CHECK(tags.values(3).kind_case() == google::protobuf::Value::kNullValue);
  CHECK(Field(params, "note").string_value() == "true");
  CHECK(Field(params, "empty").kind_case() == google::protobuf::Value::kStructValue);

  CHECK(spec.metadata().at("team") == "research");
  CHECK(spec.metadata().at("version") == "2");

  REQUIRE(spec.integrations_size() == 2);
  CHECK(spec.integrations(0).integration_type() == "git_repo");
  const auto& git = spec.integrations(0).fields();
  CHECK(git.fields_size() == 3);
  CHECK(Field(git, "git_repo").string_value() == "org/repo");
  CHECK(Field(git, "ssh_clone").bool_value());
  CHECK(spec.integrations(1).integration_type() == "wandb");
}

TEST_CASE("a minimal run spec gets defaults", "[run_spec]") {
  const RunSpec spec = MustParse("name: hello\ncommand: echo hi\n");
  CHECK(spec.name() == "hello");
  CHECK(spec.command() == "echo hi");
  CHECK_FALSE(spec.has_compute());
  CHECK(spec.scheduling().priority() == tessera::v1::PRIORITY_MEDIUM);
  CHECK_FALSE(spec.scheduling().has_max_retries());
  CHECK_FALSE(spec.scheduling().has_retry_on_system_failure());
  CHECK_FALSE(spec.has_parameters());
}

TEST_CASE("a run that accepts fewer nodes says how few, and it round trips", "[run_spec]") {
  const RunSpec spec =
      MustParse("name: big\ncommand: x\ncompute:\n  gpus: 32\n  nodes: 4\n  min_nodes: 2\n");
  CHECK(spec.compute().nodes() == 4);
  CHECK(spec.compute().min_nodes() == 2);
  RequireRoundTrip(spec);
}

TEST_CASE("fields written as null are absent", "[run_spec]") {
  const RunSpec spec = MustParse(
      "name: hello\ncommand: echo hi\nimage:\ncompute: ~\nscheduling: null\nparameters:\n");
  CHECK(spec.image().empty());
  CHECK_FALSE(spec.has_compute());
  CHECK_FALSE(spec.has_parameters());
  CHECK(spec.scheduling().priority() == tessera::v1::PRIORITY_MEDIUM);
}

TEST_CASE("priorities are case-insensitive and auto means medium", "[run_spec]") {
  const std::pair<const char*, tessera::v1::Priority> cases[] = {
      {"high", tessera::v1::PRIORITY_HIGH},   {"MEDIUM", tessera::v1::PRIORITY_MEDIUM},
      {"Low", tessera::v1::PRIORITY_LOW},     {"lowest", tessera::v1::PRIORITY_LOWEST},
      {"auto", tessera::v1::PRIORITY_MEDIUM}, {"'AUTO'", tessera::v1::PRIORITY_MEDIUM},
  };
  for (const auto& [text, priority] : cases) {
    const RunSpec spec =
        MustParse(std::string("name: a\ncommand: x\nscheduling:\n  priority: ") + text + "\n");
    CHECK(spec.scheduling().priority() == priority);
  }
}

TEST_CASE("launch says node or rank, and left out the run is launched as mcli launches it",
          "[run_spec]") {
  CHECK(MustParse("name: a\ncommand: x\n").launch() == tessera::v1::LAUNCH_MODE_UNSPECIFIED);
  CHECK(MustParse("name: a\ncommand: x\nlaunch: node\n").launch() == tessera::v1::LAUNCH_MODE_NODE);
  CHECK(MustParse("name: a\ncommand: x\nlaunch: Rank\n").launch() == tessera::v1::LAUNCH_MODE_RANK);
  const RunSpec per_rank = MustParse("name: a\ncommand: x\nlaunch: rank\n");
  CHECK(RunSpecToYaml(per_rank).find("launch: rank\n") != std::string::npos);
  CHECK(MustParse(RunSpecToYaml(per_rank)).launch() == tessera::v1::LAUNCH_MODE_RANK);
  auto bad = tessera::spec::ParseRunSpec("name: a\ncommand: x\nlaunch: gpu\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("launch") != std::string::npos);
  CHECK(std::string(bad.status().message()).find("node") != std::string::npos);
}

TEST_CASE("secrets name the owner's secrets a run gets, or all of them", "[run_spec]") {
  CHECK(MustParse("name: a\ncommand: x\n").secrets_size() == 0);
  const RunSpec named = MustParse("name: a\ncommand: x\nsecrets: [hf, gcp-creds]\n");
  REQUIRE(named.secrets_size() == 2);
  CHECK(named.secrets(1) == "gcp-creds");
  CHECK_FALSE(named.all_secrets());
  CHECK(RunSpecToYaml(named).find("secrets: [hf, gcp-creds]\n") != std::string::npos);
  CHECK(MessageDifferencer::Equals(MustParse(RunSpecToYaml(named)), named));
  for (const char* all : {"all", "ALL", "'All'"}) {
    const RunSpec every = MustParse(std::string("name: a\ncommand: x\nsecrets: ") + all + "\n");
    CHECK(every.all_secrets());
    CHECK(every.secrets_size() == 0);
    CHECK(MustParse(RunSpecToYaml(every)).all_secrets());
  }
  // What the REST API prints is taken back.
  auto json =
      tessera::spec::ParseRunSpecJson(R"({"name": "a", "command": "x", "allSecrets": true})");
  REQUIRE(json.ok());
  CHECK(json->all_secrets());
  json = tessera::spec::ParseRunSpecJson(R"({"name": "a", "command": "x", "secrets": ["hf"]})");
  REQUIRE(json.ok());
  CHECK(json->secrets(0) == "hf");

  const std::pair<const char*, const char*> bad[] = {
      {"secrets: hf\n", "all (every one"},
      {"secrets: 3\n", "all (every one"},
      {"secrets: {hf: 1}\n", "all (every one"},
      {"secrets: [Bad_Name]\n", "secrets[0]: 'Bad_Name' is not a secret's name"},
      {"secrets: [hf, hf]\n", "secrets[1]: 'hf' is named twice"},
      {"secrets: [hf]\nall_secrets: true\n", "give one or the other"},
  };
  for (const auto& [yaml, says] : bad) {
    INFO(yaml);
    auto parsed = ParseRunSpec(std::string("name: a\ncommand: x\n") + yaml);
    REQUIRE_FALSE(parsed.ok());
    CHECK_THAT(std::string(parsed.status().message()), Catch::Contains(says));
  }
  std::string many = "name: a\ncommand: x\nsecrets: [";
  for (int i = 0; i < 65; ++i) many += "s" + std::to_string(i) + (i < 64 ? ", " : "]\n");
  auto too_many = ParseRunSpec(many);
  REQUIRE_FALSE(too_many.ok());
  CHECK_THAT(std::string(too_many.status().message()), Catch::Contains("at most 64"));
}

TEST_CASE("env_variables accept mcli's list form", "[run_spec]") {
  const RunSpec spec = MustParse(R"(name: a
command: x
env_variables:
  - key: FOO
    value: bar
  - key: _UNDER_1
    value: 3
)");
  REQUIRE(spec.env_variables_size() == 2);
  CHECK(spec.env_variables(0).key() == "FOO");
  CHECK(spec.env_variables(0).value() == "bar");
  CHECK(spec.env_variables(1).key() == "_UNDER_1");
  CHECK(spec.env_variables(1).value() == "3");
}

TEST_CASE("parameter scalars follow the YAML 1.2 core schema", "[run_spec]") {
  const RunSpec spec = MustParse(R"(name: a
command: x
parameters:
  t: True
  f: FALSE
  yes_is_a_string: yes
  tilde: ~
  octal: 0o17
  negative: -12
  plus: +7
  exp: 1e3
  dot: .5
  version: 1.2.3
  quoted_number: '12'
  tagged: !!str 12
  anchor: &shared [1, 2]
  alias: *shared
)");
  const auto& p = spec.parameters();
  CHECK(Field(p, "t").bool_value());
  CHECK(Field(p, "f").kind_case() == google::protobuf::Value::kBoolValue);
  CHECK(Field(p, "yes_is_a_string").string_value() == "yes");
  CHECK(Field(p, "tilde").kind_case() == google::protobuf::Value::kNullValue);
  CHECK(Field(p, "octal").number_value() == 15);
  CHECK(Field(p, "negative").number_value() == -12);
  CHECK(Field(p, "plus").number_value() == 7);
  CHECK(Field(p, "exp").number_value() == 1000);
  CHECK(Field(p, "dot").number_value() == 0.5);
  CHECK(Field(p, "version").string_value() == "1.2.3");
  CHECK(Field(p, "quoted_number").string_value() == "12");
  CHECK(Field(p, "tagged").string_value() == "12");
  CHECK(Field(p, "alias").list_value().values_size() == 2);
}

TEST_CASE("the full spec round trips through RunSpecToYaml", "[run_spec]") {
  const RunSpec spec = MustParse(kFullSpec);
  RequireRoundTrip(spec);
}

TEST_CASE("awkward strings round trip", "[run_spec]") {
  RunSpec spec = MustParse("name: a\ncommand: x\n");
  const std::string strings[] = {
      "",       "true",       "null",
      "~",      "12",         "0x1F",
      "1e3",    ".inf",       "yes",
      "No",     " leading",   "trailing ",
      "a: b",   "- item",     "#hash",
      "[x]",    "{y}",        "quote\"s",
      "back\\", "tab\there",  "\x01\x7f",
      "line\n", "two\nlines", "end\n\n",
      "\n",     "héllo ✓",    "&anchor",
      "*alias", "!tag",       "%directive",
      "@at",    "`tick",      "'single'",
      "---",    "...",        "a #b",
      "\r\n",   "  \n  x\n",  std::string(2000, 'k'),
  };
  int i = 0;
  for (const std::string& s : strings) {
    // Taken again each time: a map pointer held across reflection (the round trip) goes stale.
    auto* params = spec.mutable_parameters()->mutable_fields();
    (*params)["k" + std::to_string(i++)].set_string_value(s);
    (*params)[s].set_number_value(i);  // and as a key
    spec.set_command("run " + std::to_string(i) + "\n" + s + "\n");
    tessera::v1::EnvVar* var = spec.add_env_variables();
    var->set_key("V" + std::to_string(i));
    var->set_value(s);
    (*spec.mutable_metadata())["m" + std::to_string(i)] = s;
    RequireRoundTrip(spec);
  }
}

TEST_CASE("numbers round trip exactly", "[run_spec]") {
  RunSpec spec = MustParse("name: a\ncommand: x\n");
  const double numbers[] = {0,    -0.0,    1,      -1,      0.1,
                            1e20, 1e-300,  5e-324, 1.7e308, 123456789012345678.0,
                            0.3,  2.0 / 3, -2.5e-7};
  auto* params = spec.mutable_parameters()->mutable_fields();
  int i = 0;
  for (double d : numbers) (*params)["n" + std::to_string(i++)].set_number_value(d);
  spec.mutable_scheduling()->set_max_duration_hours(2.0 / 3);
  spec.mutable_scheduling()->set_mfu_threshold(0.1 + 0.2);
  RequireRoundTrip(spec);
}

TEST_CASE("nested parameters and integrations round trip", "[run_spec]") {
  const RunSpec spec = MustParse(R"(name: nested
command: x
parameters:
  a: {b: [1, [2, {c: []}], {}], d: null}
  "key with spaces": {"": 1}
integrations:
  - integration_type: pip
  - {integration_type: apt_packages, packages: [vim, git], upgrade: false}
)");
  CHECK_FALSE(spec.integrations(0).has_fields());
  RequireRoundTrip(spec);
}

}  // namespace run_spec_parse_test
