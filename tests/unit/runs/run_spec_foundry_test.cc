// Public mcli YAML files of a well-known training repository (llm-foundry's) parse as mcli
// reads them.
#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "runspec/run_spec_parser.h"
#include "tests/unit/runs/run_spec_test_helpers.h"

namespace run_spec_foundry_test {

using namespace tessera::spec::testing;  // NOLINT: the helpers of these tests

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

}  // namespace run_spec_foundry_test
