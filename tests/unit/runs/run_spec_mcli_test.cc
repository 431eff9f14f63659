// What mcli accepts and Tessera must too: older field names, value forms, run names made valid
// the way mcli makes them, fields ignored with a note; llm-foundry's mcli YAMLs; NormalizeRunSpec
// for specs from gRPC. The same spec as JSON: run_spec_json_test.cc.

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
#include "tests/unit/runs/run_spec_test_helpers.h"

namespace run_spec_mcli_test {

using namespace tessera::spec::testing;  // NOLINT: the helpers of these tests
using tessera::spec::IsValidRunName;
using tessera::spec::NormalizeRunName;
using tessera::spec::NormalizeRunSpec;
using tessera::spec::ParseRunSpec;
using tessera::spec::ParseRunSpecJson;
using tessera::spec::PriorityFromName;
using tessera::spec::RunSpecToYaml;
using tessera::v1::RunSpec;

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
                          "parameters, metadata, integrations, launch, secrets)"));
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

}  // namespace run_spec_mcli_test
