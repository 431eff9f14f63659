// What mcli accepts and Tessera must too: older field names, value forms, run names made valid
// the way mcli makes them, fields ignored with a note; llm-foundry's mcli YAMLs; the same spec as
// JSON (ParseRunSpecJson); NormalizeRunSpec for specs from gRPC.

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "runspec/run_name.h"
#include "runspec/run_spec_parser.h"

namespace {

using google::protobuf::util::MessageDifferencer;
using tessera::spec::IsValidRunName;
using tessera::spec::NormalizeRunName;
using tessera::spec::NormalizeRunSpec;
using tessera::spec::ParseRunSpec;
using tessera::spec::ParseRunSpecJson;
using tessera::spec::PriorityFromName;
using tessera::spec::RunSpecToYaml;
using tessera::v1::RunSpec;

struct Parsed {
  RunSpec spec;
  std::vector<std::string> notes;

  bool HasNote(const std::string& start, const std::string& also = "") const {
    for (const std::string& note : notes) {
      if (note.starts_with(start) && note.find(also) != std::string::npos) return true;
    }
    return false;
  }
};

Parsed MustParse(const std::string& yaml) {
  Parsed parsed;
  absl::StatusOr<RunSpec> spec = ParseRunSpec(yaml, &parsed.notes);
  INFO(yaml);
  INFO(spec.status().ToString());
  REQUIRE(spec.ok());
  parsed.spec = *std::move(spec);
  INFO("notes:\n" << absl::StrJoin(parsed.notes, "\n"));
  return parsed;
}

Parsed MustParseJson(const std::string& json) {
  Parsed parsed;
  absl::StatusOr<RunSpec> spec = ParseRunSpecJson(json, &parsed.notes);
  INFO(json);
  INFO(spec.status().ToString());
  REQUIRE(spec.ok());
  parsed.spec = *std::move(spec);
  return parsed;
}

std::string JsonError(const std::string& json) {
  const absl::StatusOr<RunSpec> spec = ParseRunSpecJson(json);
  INFO(json);
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

void CheckEqual(const RunSpec& expected, const RunSpec& actual) {
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  const bool equal = differencer.Compare(expected, actual);
  INFO("differences: " << diff);
  CHECK(equal);
}

// A spec as the YAML's canonical form reads it back, with no notes the second time.
void RequireCanonicalRoundTrip(const RunSpec& spec) {
  const std::string yaml = RunSpecToYaml(spec);
  INFO("emitted:\n" << yaml);
  const Parsed again = MustParse(yaml);
  CHECK(again.notes.empty());
  CheckEqual(spec, again.spec);
}

// --- Run names ---------------------------------------------------------------------------------

TEST_CASE("run names are made valid the way mcli makes them", "[run_spec][mcli]") {
  const std::pair<std::string, std::string> cases[] = {
      // Valid names are kept: a leading digit is fine (an RFC 1123 label, as mcli checks).
      {"llama-7b", "llama-7b"},
      {"1run", "1run"},
      {"a", "a"},
      {std::string(54, 'a'), std::string(54, 'a')},
      // Lower-cased, other characters to '-'.
      {"My_Run", "my-run"},
      {"LLaMA-7B.v2", "llama-7b-v2"},
      {"mosaic gpt 1b", "mosaic-gpt-1b"},
      // A bad last character becomes '1'.
      {"run-", "run1"},
      {"hello world!", "hello-world1"},
      // A bad first character gets a '1' in front, and the last character goes (mcli's rule).
      {"-leading", "1-leadin"},
      {"_x_", "1-x"},
      {"___", "1-1"},
      {"_", "1"},
      // One '-' per character, not per byte.
      {"h\xc3\xa9llo", "h-llo"},
      {"\xc3\x9cn\xc3\xaf"
       "c\xc3\xb6"
       "d\xc3\xa9",
       "1-n-c-d"},
      // mcli keeps up to 56 characters; Tessera's suffix leaves room for 54.
      {std::string(56, 'a'), std::string(54, 'a')},
      {std::string(53, 'a') + "-bc", std::string(53, 'a') + "1"},
      {"Run_" + std::string(52, 'x'), "run-" + std::string(50, 'x')},
      // What mcli refuses is left for the validator to refuse.
      {std::string(57, 'a'), std::string(57, 'a')},
      {"", ""},
  };
  for (const auto& [name, expected] : cases) {
    INFO("name: \"" << name << "\"");
    const std::string normalized = NormalizeRunName(name);
    CHECK(normalized == expected);
    if (!name.empty() && name.size() <= 56) CHECK(IsValidRunName(normalized));
  }
  CHECK_FALSE(IsValidRunName("-a"));
  CHECK_FALSE(IsValidRunName("a-"));
  CHECK_FALSE(IsValidRunName("A"));
  CHECK_FALSE(IsValidRunName(std::string(55, 'a')));
  CHECK(IsValidRunName("0"));
}

TEST_CASE("a name changed while parsing is noted where it was written", "[run_spec][mcli]") {
  SECTION("name") {
    const Parsed p = MustParse("name: My_Run\ncommand: x\n");
    CHECK(p.spec.name() == "my-run");
    REQUIRE(p.notes.size() == 1);
    CHECK(absl::StartsWith(p.notes[0], "name: \"My_Run\" changed to \"my-run\", as mcli changes"));
  }
  SECTION("run_name") {
    const Parsed p = MustParse("run_name: Mosaic_GPT\ncommand: x\n");
    CHECK(p.spec.name() == "mosaic-gpt");
    CHECK(p.HasNote("run_name: read as name"));
    CHECK(p.HasNote("run_name: \"Mosaic_GPT\" changed to \"mosaic-gpt\""));
  }
  SECTION("a valid name gets no note") {
    const Parsed p = MustParse("name: 7b-run\ncommand: x\n");
    CHECK(p.spec.name() == "7b-run");
    CHECK(p.notes.empty());
  }
}

// --- Older field names -------------------------------------------------------------------------

TEST_CASE("older mcli top-level fields are read as today's, each with a note", "[run_spec][mcli]") {
  const Parsed p = MustParse(R"(run_name: mosaic-gpt-1b-gpus-8
entrypoint: echo hi
gpu_num: 8
gpu_type: a100_40gb
cluster: r0z0
)");
  CHECK(p.spec.name() == "mosaic-gpt-1b-gpus-8");
  CHECK(p.spec.command() == "echo hi");
  CHECK(p.spec.compute().gpus() == 8);
  CHECK(p.spec.compute().gpu_type() == "a100_40gb");
  CHECK(p.spec.compute().cluster() == "r0z0");
  CHECK(p.HasNote("run_name: read as name (an older mcli name for it)"));
  CHECK(p.HasNote("entrypoint: read as command"));
  CHECK(p.HasNote("gpu_num: read as compute.gpus"));
  CHECK(p.HasNote("gpu_type: read as compute.gpu_type"));
  CHECK(p.HasNote("cluster: read as compute.cluster"));
  CHECK(p.notes.size() == 5);
  RequireCanonicalRoundTrip(p.spec);
}

TEST_CASE("platform, the older name of cluster, is read as compute.cluster", "[run_spec][mcli]") {
  const Parsed p = MustParse("name: a\ncommand: x\nplatform: r1z1\n");
  CHECK(p.spec.compute().cluster() == "r1z1");
  CHECK(p.HasNote("platform: read as compute.cluster"));
}

TEST_CASE("today's field wins over an older one, as in mcli", "[run_spec][mcli]") {
  const Parsed p = MustParse(R"(name: current
run_name: older
command: x
gpu_num: 4
gpu_type: a100_40gb
cluster: top
platform: oldest
compute:
  gpus: 16
  gpu_type: h100_80gb
  cluster: inside
)");
  CHECK(p.spec.name() == "current");
  CHECK(p.spec.compute().gpus() == 16);
  CHECK(p.spec.compute().gpu_type() == "h100_80gb");
  CHECK(p.spec.compute().cluster() == "inside");
  CHECK(p.HasNote("run_name: not used: name is given"));
  CHECK(p.HasNote("gpu_num: not used: compute.gpus is given"));
  CHECK(p.HasNote("gpu_type: not used: compute.gpu_type is given"));
  CHECK(p.HasNote("cluster: not used: compute.cluster is given"));
  CHECK(p.HasNote("platform: not used: compute.cluster is given"));

  const Parsed q = MustParse("name: a\ncommand: x\ncluster: top\nplatform: oldest\n");
  CHECK(q.spec.compute().cluster() == "top");
  CHECK(q.HasNote("platform: not used: cluster is given"));
}

TEST_CASE("an older field does not create compute unless it sets something", "[run_spec][mcli]") {
  const Parsed p = MustParse("name: a\ncommand: x\ngpu_num:\ncluster:\n");
  CHECK_FALSE(p.spec.has_compute());
  CHECK(p.notes.empty());
}

TEST_CASE("gpu_type may be written as a number, as mcli allows", "[run_spec][mcli]") {
  const Parsed p = MustParse("name: a\ncommand: x\ngpu_type: 4090\n");
  CHECK(p.spec.compute().gpu_type() == "4090");
  const Parsed q = MustParse("name: a\ncommand: x\ncompute:\n  gpu_type: 3090\n");
  CHECK(q.spec.compute().gpu_type() == "3090");
  CHECK(q.notes.empty());
}

TEST_CASE("scheduling's other spellings of retry_on_system_failure", "[run_spec][mcli]") {
  const Parsed p = MustParse("name: a\ncommand: x\nscheduling:\n  retryOnSystemFailure: true\n");
  REQUIRE(p.spec.scheduling().has_retry_on_system_failure());
  CHECK(p.spec.scheduling().retry_on_system_failure());
  CHECK(p.HasNote("scheduling.retryOnSystemFailure: read as scheduling.retry_on_system_failure"));
  const Parsed q = MustParse("name: a\ncommand: x\nscheduling:\n  watchdogEnabled: false\n");
  REQUIRE(q.spec.scheduling().has_retry_on_system_failure());
  CHECK_FALSE(q.spec.scheduling().retry_on_system_failure());
  CHECK(q.HasNote("scheduling.watchdogEnabled: read as"));
}

TEST_CASE("fields that mean nothing to Tessera are accepted and ignored, with a note",
          "[run_spec][mcli]") {
  const Parsed p = MustParse(R"(name: a
command: x
cpus: 4
optimization_level: 2
partitions: [p1, p2]
parent_name: the-run-that-started-me
dependent_deployment:
  image: mosaicml/inference-server:latest
  model: {downloader: x}
compute:
  gpus: 8
  cpus: 16
scheduling:
  resumable: true
)");
  const Parsed plain = MustParse("name: a\ncommand: x\ncompute:\n  gpus: 8\nscheduling: {}\n");
  CheckEqual(plain.spec, p.spec);
  for (const char* field : {"cpus", "optimization_level", "partitions", "parent_name",
                            "dependent_deployment", "compute.cpus", "scheduling.resumable"}) {
    INFO(field);
    CHECK(p.HasNote(std::string(field) + ": ignored: "));
  }
  CHECK(p.notes.size() == 7);
  // A single partition, as mcli turns it into a list.
  CHECK(MustParse("name: a\ncommand: x\npartitions: p1\n").HasNote("partitions: ignored"));
}

TEST_CASE("deprecated and ignored fields are not offered as known fields", "[run_spec][mcli]") {
  const auto spec = ParseRunSpec("name: a\ncommand: x\nfoo: 1\n");
  REQUIRE_FALSE(spec.ok());
  CHECK(absl::StrContains(spec.status().message(),
                          "(known: name, image, command, compute, scheduling, env_variables, "
                          "parameters, metadata, integrations)"));
}

// --- Value forms -------------------------------------------------------------------------------

TEST_CASE("YAML 1.1 booleans are read as mcli (PyYAML) reads them", "[run_spec][mcli]") {
  const std::pair<const char*, bool> cases[] = {
      {"yes", true}, {"Yes", true}, {"YES", true}, {"no", false},  {"No", false},  {"NO", false},
      {"on", true},  {"On", true},  {"ON", true},  {"off", false}, {"Off", false}, {"OFF", false}};
  for (const auto& [word, value] : cases) {
    INFO(word);
    const Parsed p = MustParse(std::string("name: a\ncommand: x\nscheduling:\n  preemptible: ") +
                               word + "\n  retry_on_system_failure: " + word + "\n");
    CHECK(p.spec.scheduling().preemptible() == value);
    CHECK(p.spec.scheduling().retry_on_system_failure() == value);
    CHECK(p.HasNote(std::string("scheduling.preemptible: ") + word + " read as " +
                    (value ? "true" : "false") + " (a YAML 1.1 boolean, as mcli reads it)"));
  }
  // An integration's own fields too (git_repo's ssh_clone, pip_packages' upgrade take booleans).
  const Parsed i = MustParse(
      "name: a\ncommand: x\nintegrations:\n  - integration_type: git_repo\n    git_repo: o/r\n"
      "    ssh_clone: yes\n    path: 'no'\n    tags: [on]\n");
  const auto& fields = i.spec.integrations(0).fields().fields();
  CHECK(fields.at("ssh_clone").bool_value());
  CHECK(fields.at("path").string_value() == "no");
  CHECK(fields.at("tags").list_value().values(0).string_value() == "on");
  CHECK(i.HasNote("integrations[0].ssh_clone: yes read as true"));
  CHECK(i.notes.size() == 1);
  RequireCanonicalRoundTrip(i.spec);
  // Parameters keep the YAML 1.2 typing (what the run gets is documented that way): "yes" is
  // text there.
  const Parsed p = MustParse("name: a\ncommand: x\nparameters:\n  flag: yes\n");
  CHECK(p.spec.parameters().fields().at("flag").string_value() == "yes");
  CHECK(p.notes.empty());
}

TEST_CASE("priorities in every spelling", "[run_spec][mcli]") {
  const std::pair<const char*, tessera::v1::Priority> cases[] = {
      {"PRIORITY_LOW", tessera::v1::PRIORITY_LOW},
      {"priority_high", tessera::v1::PRIORITY_HIGH},
      {"Lowest", tessera::v1::PRIORITY_LOWEST},
      {"AUTO", tessera::v1::PRIORITY_MEDIUM},
      {"Priority_Medium", tessera::v1::PRIORITY_MEDIUM},
  };
  for (const auto& [text, priority] : cases) {
    INFO(text);
    const Parsed p =
        MustParse(std::string("name: a\ncommand: x\nscheduling:\n  priority: ") + text + "\n");
    CHECK(p.spec.scheduling().priority() == priority);
    CHECK(PriorityFromName(text) == priority);
  }
  CHECK_FALSE(
      ParseRunSpec("name: a\ncommand: x\nscheduling:\n  priority: PRIORITY_UNSPECIFIED\n").ok());
  CHECK_FALSE(PriorityFromName("PRIORITY_UNSPECIFIED").has_value());
  CHECK_FALSE(PriorityFromName("urgent").has_value());
  CHECK_FALSE(PriorityFromName("").has_value());
}

TEST_CASE("metadata values of any shape, as mcli takes them", "[run_spec][mcli]") {
  const Parsed p = MustParse(R"(name: a
command: x
metadata:
  team: research
  tags: [nlp, "7b"]
  owner: {name: ada, id: 7}
  nothing:
)");
  const auto& metadata = p.spec.metadata();
  CHECK(metadata.at("team") == "research");
  CHECK(metadata.at("tags") == R"(["nlp","7b"])");
  CHECK(metadata.at("owner") == R"({"name":"ada","id":7})");
  CHECK(metadata.count("nothing") == 0);
  CHECK(p.HasNote("metadata.tags: a sequence, kept as its JSON text"));
  CHECK(p.HasNote("metadata.owner: a mapping, kept as its JSON text"));
  CHECK(p.HasNote("metadata.nothing: null, left out"));
  RequireCanonicalRoundTrip(p.spec);
}

TEST_CASE("an integration's type may be given as type, mcli's API name", "[run_spec][mcli]") {
  const Parsed p = MustParse(R"(name: a
command: x
integrations:
  - type: pip_packages
    packages: [oci-cli]
)");
  REQUIRE(p.spec.integrations_size() == 1);
  CHECK(p.spec.integrations(0).integration_type() == "pip_packages");
  CHECK(p.spec.integrations(0).fields().fields().count("type") == 0);
  CHECK(p.spec.integrations(0).fields().fields().count("packages") == 1);
  CHECK(p.HasNote("integrations[0].type: read as integrations[0].integration_type"));
  RequireCanonicalRoundTrip(p.spec);
}

// --- llm-foundry's mcli YAMLs ------------------------------------------------------------------

// The shape of llm-foundry's older mcli/mcli-1b.yaml: the run name, the GPUs and the cluster at
// the top level under their older names.
constexpr const char* kFoundryPretrain = R"(integrations:
- integration_type: git_repo
  git_repo: mosaicml/llm-foundry
  # git_branch: # use your branch
  # git_commit: # OR use your commit hash
  pip_install: -e .[gpu]
  ssh_clone: false # Should be true if using a private repo

command: |
  cd llm-foundry/scripts
  python data_prep/convert_dataset_hf.py --dataset c4 --data_subset en \
    --out_root ./my-copy-c4 --splits train_small val_small --concat_tokens 2048
  composer train/train.py train/yamls/pretrain/mpt-1b.yaml max_duration=100ba
image: mosaicml/pytorch:1.13.1_cu117-python3.10-ubuntu20.04
# Mosaic Cloud will use run_name (with a unique suffix) to populate the env var $RUN_NAME
run_name: mosaic-gpt-1b-gpus-8

gpu_num: 8
gpu_type: a100_40gb
cluster: r0z0 # replace with your cluster here!

# Injected as a YAML file: /mnt/config/parameters.yaml
parameters: {}
)";

// The shape of mcli/mcli-openai-eval.yaml: older fields left empty (null).
constexpr const char* kFoundryOpenAiEval = R"(integrations:
- integration_type: git_repo
  git_repo: mosaicml/llm-foundry
  git_branch: v0.15.0
  pip_install: .[gpu,openai]
  ssh_clone: false  # Should be true if using a private repo

command: |
  cd llm-foundry/scripts
  composer eval/eval.py /mnt/config/parameters.yaml

run_name: openai-eval
gpu_num:  #
gpu_type:  #
cluster:  # replace with your cluster here!

image: mosaicml/llm-foundry:2.5.1_cu124-latest

parameters:
  seed: 1
  max_seq_len: 1024
  device_eval_batch_size: 4
  models:
  -
    model_name: openai/gpt-3.5-turbo
    model:
      name: openai_chat
      version: gpt-3.5-turbo
    tokenizer:
      name: tiktoken
      kwargs:
        model_name: gpt-3.5-turbo
  icl_tasks: "eval/yamls/lm_tasks_v0.2.yaml"
)";

// The shape of mcli/mcli-dependent-deployment-eval.yaml: today's compute, a deployment started
// next to the run (which Tessera ignores), wandb.
constexpr const char* kFoundryDependentDeployment = R"(integrations:
- integration_type: git_repo
  git_repo: mosaicml/llm-foundry
  git_branch: main
  pip_install: -e ".[gpu-flash2,openai]"
  ssh_clone: false
- integration_type: wandb
  entity: mosaic-ml
  project: dependent_deployment_eval

command: |
  cd llm-foundry/scripts
  composer eval/eval.py /mnt/config/parameters.yaml

name: dependent-deployment-llama-gauntlet-eval
# cluster: r1z1  # replace with your cluster here!
# gpu_num: 8 #

compute:
  gpus: 8
  cluster: r1z1

image: mosaicml/llm-foundry:2.2.1_cu121_flash2-latest
dependent_deployment:
  image: mosaicml/inference-server:0.2.27-trtllm
  model:
    downloader: trt_download.download_mpt
    model_parameters:
      tokenizer_name: mosaicml/mpt-7b
      max_context_length: 2048
  env_variables:
    MODEL_BACKEND_OVERRIDE: trtllm

parameters:
  seed: 1
  max_seq_len: 2048
  models:
  - model:
      name: fmapi_chat
      local: true
    tokenizer:
      name: mosaicml/mpt-7b
      kwargs:
        model_max_length: ${max_seq_len}
    model_name: mpt-dep-deployment
  icl_tasks:
  - label: gsm8k
    num_fewshot:
    - 0
    continuation_delimiter: "\n\nA:"
    question_prelimiter: ""
    early_stopping_criteria:
    - "\n\n"
    - "Question:"
)";

// The shape of mcli/mcli-pretokenize-oci-upload.yaml: today's fields only.
constexpr const char* kFoundryPretokenize = R"(name: c4-2k-pre-tokenized
image: mosaicml/pytorch:1.13.1_cu117-python3.10-ubuntu20.04
compute:
  gpus: 8  # Number of GPUs to use

  ## These configurations are optional
  # cluster: TODO # Name of the cluster to use for this run

integrations:
- integration_type: pip_packages
  # Install necessary oci-cli
  packages:
  - oci-cli==3.23.2
- integration_type: git_repo
  git_repo: mosaicml/llm-foundry
  git_branch: v0.2.0
  pip_install: '.'
  ssh_clone: false # Should be true if using a private repo

command: |
  cd llm-foundry/scripts/data_prep/
  python convert_dataset_hf.py --dataset c4 --data_subset en --out_root ./my-copy-c4
  oci os object bulk-upload -bn YOUR_BUCKET_HERE --src-dir my-copy-c4/
)";

TEST_CASE("llm-foundry's mcli YAMLs parse", "[run_spec][mcli]") {
  SECTION("pretraining, with the older top-level fields") {
    const Parsed p = MustParse(kFoundryPretrain);
    CHECK(p.spec.name() == "mosaic-gpt-1b-gpus-8");
    CHECK(p.spec.image() == "mosaicml/pytorch:1.13.1_cu117-python3.10-ubuntu20.04");
    CHECK(p.spec.compute().gpus() == 8);
    CHECK(p.spec.compute().gpu_type() == "a100_40gb");
    CHECK(p.spec.compute().cluster() == "r0z0");
    REQUIRE(p.spec.integrations_size() == 1);
    CHECK(p.spec.integrations(0).integration_type() == "git_repo");
    CHECK(p.spec.integrations(0).fields().fields().at("pip_install").string_value() == "-e .[gpu]");
    CHECK(p.spec.has_parameters());
    CHECK(p.notes.size() == 4);
    RequireCanonicalRoundTrip(p.spec);
  }
  SECTION("an eval whose older fields are left empty") {
    const Parsed p = MustParse(kFoundryOpenAiEval);
    CHECK(p.spec.name() == "openai-eval");
    CHECK_FALSE(p.spec.has_compute());
    CHECK(p.spec.parameters().fields().at("models").list_value().values_size() == 1);
    CHECK(p.notes.size() == 1);  // run_name
    RequireCanonicalRoundTrip(p.spec);
  }
  SECTION("an eval with a dependent deployment") {
    const Parsed p = MustParse(kFoundryDependentDeployment);
    CHECK(p.spec.name() == "dependent-deployment-llama-gauntlet-eval");
    CHECK(p.spec.compute().gpus() == 8);
    CHECK(p.spec.compute().cluster() == "r1z1");
    CHECK(p.spec.integrations_size() == 2);
    CHECK(p.spec.env_variables_size() == 0);  // the deployment's, not the run's
    CHECK(p.HasNote("dependent_deployment: ignored: Tessera does not start inference deployments"));
    RequireCanonicalRoundTrip(p.spec);
  }
  SECTION("pretokenizing, with today's fields only") {
    const Parsed p = MustParse(kFoundryPretokenize);
    CHECK(p.spec.name() == "c4-2k-pre-tokenized");
    CHECK(p.spec.integrations(0).integration_type() == "pip_packages");
    CHECK(p.notes.empty());
    RequireCanonicalRoundTrip(p.spec);
  }
}

// --- The same spec as JSON ---------------------------------------------------------------------

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

TEST_CASE("NormalizeRunSpec makes a gRPC spec's name valid and validates it", "[run_spec][mcli]") {
  RunSpec spec;
  spec.set_name("My_Run");
  spec.set_command("x");
  std::vector<std::string> notes;
  CHECK(NormalizeRunSpec(&spec, &notes).ok());
  CHECK(spec.name() == "my-run");
  REQUIRE(notes.size() == 1);
  CHECK(absl::StartsWith(notes[0], "name: \"My_Run\" changed to \"my-run\""));

  notes.clear();
  spec.clear_command();
  const absl::Status status = NormalizeRunSpec(&spec, &notes);
  CHECK(status.message() == "command: required field is missing or empty");
  CHECK(notes.empty());
  spec.set_command("x");
  spec.set_name(std::string(57, 'a'));
  CHECK(absl::StrContains(NormalizeRunSpec(&spec, nullptr).message(), "57 characters long"));
}

}  // namespace
