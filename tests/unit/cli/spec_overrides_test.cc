// The run YAML read locally, and the command line's overrides applied and validated again.

#include "cli/spec_overrides.h"

#include <catch2/catch.hpp>

#include "cli/errors.h"
#include "tests/support/temp_dir.h"

namespace spec_overrides_test {

using tessera::cli::ApplyOverrides;
using tessera::cli::CliError;
using tessera::cli::LoadRunSpecFile;
using tessera::cli::SpecOverrides;

constexpr const char* kSpec = R"(name: train
image: pytorch:latest
command: python train.py
compute:
  cluster: c1
  gpus: 8
scheduling:
  priority: low
)";

// A run YAML file with `text`, in a folder of its own.
struct TempFile {
  explicit TempFile(const std::string& text) : path(dir.Write("run.yaml", text)) {}
  tessera::testing::TempDir dir{"mcli-spec"};
  const std::string path;
};

TEST_CASE("a run YAML file is parsed locally", "[cli][spec]") {
  TempFile file(kSpec);
  const auto spec = LoadRunSpecFile(file.path);
  CHECK(spec.name() == "train");
  CHECK(spec.compute().gpus() == 8);
  CHECK(spec.scheduling().priority() == tessera::v1::PRIORITY_LOW);
}

TEST_CASE("overrides replace the file's values", "[cli][spec]") {
  TempFile file(kSpec);
  auto spec = LoadRunSpecFile(file.path);
  SpecOverrides overrides;
  overrides.gpus = 16;
  overrides.cluster = "c2";
  overrides.priority = "high";
  overrides.name = "renamed";
  ApplyOverrides(overrides, spec);
  CHECK(spec.compute().gpus() == 16);
  CHECK(spec.compute().cluster() == "c2");
  CHECK(spec.scheduling().priority() == tessera::v1::PRIORITY_HIGH);
  CHECK(spec.name() == "renamed");
  CHECK(spec.image() == "pytorch:latest");
}

TEST_CASE("mcli's other submit overrides replace the file's values too", "[cli][spec]") {
  TempFile file(std::string(kSpec) + "  retry_on_system_failure: false\n  max_retries: 0\n");
  auto spec = LoadRunSpecFile(file.path);
  SpecOverrides overrides;
  CHECK_FALSE(overrides.Any());
  overrides.image = "pytorch:2.4";
  overrides.gpu_type = "h100";
  overrides.nodes = 2;
  overrides.node_names = {"n2", "n3"};
  overrides.preemptible = true;
  overrides.max_retries = 4;
  overrides.max_duration_hours = 1.5;
  CHECK(overrides.Any());
  ApplyOverrides(overrides, spec);
  CHECK(spec.image() == "pytorch:2.4");
  CHECK(spec.compute().gpu_type() == "h100");
  CHECK(spec.compute().nodes() == 2);
  REQUIRE(spec.compute().node_names_size() == 2);
  CHECK(spec.compute().node_names(0) == "n2");
  CHECK(spec.scheduling().preemptible());
  CHECK(spec.scheduling().max_retries() == 4);
  CHECK(spec.scheduling().retry_on_system_failure());  // --max-retries asks for retries
  CHECK(spec.scheduling().max_duration_hours() == 1.5);
  CHECK(spec.compute().gpus() == 8);  // what was not overridden stays
}

TEST_CASE("an override that makes the spec invalid is a usage error naming it", "[cli][spec]") {
  TempFile file(kSpec);
  auto spec = LoadRunSpecFile(file.path);
  SpecOverrides overrides;
  overrides.max_retries = 5000;
  try {
    ApplyOverrides(overrides, spec);
    FAIL("an invalid override was accepted");
  } catch (const CliError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("after the command-line overrides") &&
                                          Catch::Contains("max_retries"));
  }
}

TEST_CASE("no overrides leave the spec as it was", "[cli][spec]") {
  TempFile file(kSpec);
  auto spec = LoadRunSpecFile(file.path);
  const auto before = spec.SerializeAsString();
  ApplyOverrides(SpecOverrides{}, spec);
  CHECK(spec.SerializeAsString() == before);
}

TEST_CASE("overrides are validated again", "[cli][spec]") {
  TempFile file(kSpec);
  auto spec = LoadRunSpecFile(file.path);
  SpecOverrides overrides;
  overrides.gpus = -4;
  try {
    ApplyOverrides(overrides, spec);
    FAIL("expected an error");
  } catch (const CliError& e) {
    CHECK(e.exit_code() == 2);
    CHECK_THAT(e.what(), Catch::Contains("compute.gpus"));
  }
  SpecOverrides bad_priority;
  bad_priority.priority = "urgent";
  CHECK_THROWS_WITH(ApplyOverrides(bad_priority, spec), Catch::Contains("--priority"));
}

TEST_CASE("YAML errors name the file and the line", "[cli][spec]") {
  TempFile file("name: train\ncommand: run\ncompute:\n  gpus: many\n");
  try {
    LoadRunSpecFile(file.path);
    FAIL("expected an error");
  } catch (const CliError& e) {
    CHECK(e.exit_code() == 2);
    CHECK_THAT(e.what(), Catch::StartsWith(file.path + ": line 4"));
    CHECK_THAT(e.what(), Catch::Contains("compute.gpus"));
  }
}

TEST_CASE("a missing file is a usage error", "[cli][spec]") {
  try {
    LoadRunSpecFile("/nonexistent/run.yaml");
    FAIL("expected an error");
  } catch (const CliError& e) {
    CHECK(e.exit_code() == 2);
    CHECK_THAT(e.what(), Catch::Contains("/nonexistent/run.yaml"));
  }
}

}  // namespace spec_overrides_test
